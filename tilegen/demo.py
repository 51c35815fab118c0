"""``make demo``: what tilegen does today, on a real cuTile kernel (examples/vec_add.mlir).

1. parse + verify + print the kernel, and check that printing is a fixpoint (print, re-parse,
   print again: identical text);
2. the same kernel in MLIR's generic op form;
3. a broken variant (examples/vec_add_invalid.mlir) giving a located diagnostic, and the same
   file passing ``--verify-diagnostics`` because its expected-* annotations match;
4. bytecode: ``tilegen-translate`` writes the kernel as Tile IR bytecode, NVIDIA's
   ``tileirdisasm`` reads it (when installed), and tilegen reads it back;
5. run: the reference interpreter executes the kernel over its grid on the inputs cuTile
   recorded (examples/vec_add.npz) and compares with the recorded expected output;
6. lower: the kernel is converted to ``nv_tileaa`` (the first stage of the real compiler), the
   result verifies, and interpreting the lowered module gives the same output;
7. PTX: layouts are assigned, PTX is emitted for sm_80/sm_90/sm_100/sm_120 and assembled by
   ptxas (registers, spills), and the sm_90 PTX runs in the CPU SIMT simulator against the
   recorded expected output.

A stage whose engine is not built yet is reported as skipped; the demo fails (exit 1) only when a
stage that exists gives a wrong answer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tilegen.tools import driver, opt

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
KERNEL = EXAMPLES / "vec_add.mlir"
INPUTS = EXAMPLES / "vec_add.npz"
BROKEN = EXAMPLES / "vec_add_invalid.mlir"


def shown(path: Path) -> str:
    """``path`` as a user would type it from the current directory."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def banner(text: str) -> None:
    print(f"\n=== {text} " + "=" * max(0, 72 - len(text)))


def _tool(name: str) -> str:
    return driver.find_tool(name) or name


def _opt_text(text: str, name: str, **kw) -> tuple[str | None, str]:
    """Run tilegen-opt's chunk pipeline in process; returns (printed or None, rendered diags)."""
    options = opt.OptOptions(filename=name, no_implicit_module=True, **kw)
    source = driver.Source(name, text)
    result = driver.run_chunk(
        source,
        driver.Chunk(text, 1, text.count("\n") + 1),
        lambda t, e: opt.process_chunk(t, e, options),
        verify=False,
    )
    return result.output, "\n".join(driver.render(d, source) for d in result.diagnostics)


def stage_print() -> bool:
    banner(f"1. parse + verify + print {KERNEL.relative_to(EXAMPLES.parent)}")
    text = KERNEL.read_text()
    start = time.perf_counter()
    printed, diags = _opt_text(text, shown(KERNEL))
    elapsed = time.perf_counter() - start
    if printed is None:
        print(diags)
        print("FAILED: tilegen could not parse/verify the example kernel")
        return False
    print(printed, end="")
    again, diags = _opt_text(printed, "<printed>")
    if again != printed:
        print(diags or "re-printing changed the text:")
        print(again or "")
        print("FAILED: printing is not a fixpoint")
        return False
    print(
        f"-- parsed, verified and printed in {elapsed * 1000:.1f} ms; re-parsing the output "
        "prints identical text"
    )
    return True


def stage_generic() -> bool:
    banner("2. the same kernel in generic op form (-mlir-print-op-generic), first lines")
    printed, diags = _opt_text(KERNEL.read_text(), str(KERNEL), generic=True)
    if printed is None:
        print(diags)
        return False
    lines = printed.splitlines()
    print("\n".join(lines[:6] + (["  ..."] if len(lines) > 6 else [])))
    return True


def stage_diagnostic() -> bool:
    banner(f"3. a broken variant: {BROKEN.relative_to(EXAMPLES.parent)}")
    printed, diags = _opt_text(BROKEN.read_text(), shown(BROKEN))
    if printed is not None or ": error: " not in diags or "internal error" in diags:
        print(diags or "FAILED: the broken kernel was accepted")
        return False
    print(diags)
    source = driver.Source(shown(BROKEN), BROKEN.read_text())
    options = opt.OptOptions(filename=shown(BROKEN), no_implicit_module=True)
    results = driver.run_buffer(source, lambda t, e: opt.process_chunk(t, e, options), verify=True)
    failures = results[0].verifier.failures()
    if failures:
        print("\n".join(driver.render(f, source) for f in failures))
        print("FAILED: --verify-diagnostics disagrees with the annotations")
        return False
    print("-- tilegen-opt --verify-diagnostics: every expected-* annotation matched")
    return True


def stage_bytecode() -> bool:
    banner("4. bytecode: tilegen-translate -> tileirdisasm (NVIDIA) -> tilegen-translate")
    translate = _tool("tilegen-translate")
    with tempfile.TemporaryDirectory() as tmp:
        bc = os.path.join(tmp, "vec_add.tileirbc")
        cmd = [translate, "-mlir-to-cudatilebc", "-no-implicit-module", str(KERNEL), "-o", bc]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 or not os.path.exists(bc):
            first = (proc.stderr.strip().splitlines() or ["no output"])[0]
            print(f"skipped: tilegen-translate cannot write bytecode yet ({first})")
            return True
        print(f"-- wrote {os.path.getsize(bc)} bytes of Tile IR bytecode")
        disasm = driver.find_tool("tileirdisasm")
        if disasm is not None:
            proc = subprocess.run([disasm, bc], capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"-- NVIDIA tileirdisasm rejects it:\n{proc.stderr}")
                return False
            # tileirdisasm prints the module body (the entry) without the module wrapper
            ours, _ = _opt_text(KERNEL.read_text(), str(KERNEL))
            body = [l[2:] for l in (ours or "").splitlines()[1:-1] if l.strip()]
            theirs = [l for l in proc.stdout.splitlines() if l.strip()]
            same = body == theirs
            print(
                "-- NVIDIA tileirdisasm reads it and prints "
                + ("exactly what tilegen-opt prints" if same else "something else:\n" + proc.stdout)
            )
            if not same:
                return False
        else:
            print("-- tileirdisasm not installed; skipping NVIDIA's check")
        proc = subprocess.run(
            [translate, "-cudatilebc-to-mlir", "-no-implicit-module", bc],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            print(f"skipped: tilegen-translate cannot read bytecode yet: {proc.stderr.strip()}")
            return True
        reference, _ = _opt_text(KERNEL.read_text(), str(KERNEL))
        same = [l for l in proc.stdout.splitlines() if l.strip()] == [
            l for l in (reference or "").splitlines() if l.strip()
        ]
        print("-- read back: " + ("identical to the printed source" if same else "DIFFERENT"))
        return same


def _run(lower_to: str | None) -> tuple[bool, str]:
    """Interpret the example (optionally lowered first); returns (matches, summary)."""
    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.interp.api import compare_expected, load_npz_args, load_npz_expected
    from tilegen.runtime.interp.api import run_module

    module = parse_module(KERNEL.read_text(), shown(KERNEL))
    args, grid = load_npz_args(INPUTS)
    start = time.perf_counter()
    result = run_module(module, args, grid or (1, 1, 1), lower_to=lower_to)
    elapsed = time.perf_counter() - start
    problems = compare_expected(result, load_npz_expected(INPUTS), rtol=1e-5, atol=1e-6)
    if lower_to is not None:
        left = sorted({op.name for op in module.walk() if op.name.startswith("cuda_tile.")})
        if left:
            problems.append(f"cuda_tile ops left after lowering: {left}")
    names = ", ".join(f"{k}{list(v.shape)}" for k, v in args if getattr(v, "ndim", 0))
    return not problems, (
        f"grid {list(grid or (1, 1, 1))}, arrays {names}: "
        + ("output matches cuTile's expected values" if not problems else "; ".join(problems))
        + f" ({elapsed * 1000:.0f} ms)"
    )


def stage_run() -> bool:
    banner("5. run on the CPU: tilegen run examples/vec_add.mlir --args examples/vec_add.npz")
    ok, summary = _run(None)
    print("-- " + summary)
    return ok


def stage_lower() -> bool:
    banner("6. lower to nv_tileaa, verify, and run the lowered kernel")
    from tilegen.runtime.asm import parse_module, print_module
    from tilegen.runtime.interp.lowered import lower_module

    module = lower_module(parse_module(KERNEL.read_text(), shown(KERNEL)), "nv_tileaa", "sm_90")
    lines = [l for l in print_module(module).splitlines() if "nv_tileaa." in l]
    print("\n".join(lines[:8] + (["  ..."] if len(lines) > 8 else [])))
    ok, summary = _run("nv_tileaa")
    print("-- " + summary)
    return ok


def stage_ptx() -> bool:
    banner("7. compile to PTX + cubin (ptxas) and run the PTX in the SIMT simulator")
    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.codegen.driver import PtxasError, assemble, find_ptxas
    from tilegen.runtime.ptxsim import compile_to_ptx, run_ptxsim
    from tilegen.runtime.interp.api import compare_expected, load_npz_args, load_npz_expected

    ptx = compile_to_ptx(parse_module(KERNEL.read_text(), shown(KERNEL)), "sm_90")
    body = [l for l in ptx.splitlines() if l.startswith("\t") and not l.startswith("\t.")]
    print("\n".join(body[-6:]))
    if find_ptxas() is None:
        print("-- ptxas: skipped (install nvidia-cuda-nvcc)")
    else:
        for sm in (80, 90, 100, 120):
            text = compile_to_ptx(parse_module(KERNEL.read_text(), shown(KERNEL)), f"sm_{sm}")
            try:
                _, log = assemble(text, sm, verbose=True)
            except PtxasError as e:
                print(f"-- sm_{sm}: {e}")
                return False
            regs = next(
                (l.split("Used ")[1].split(",")[0] for l in log.splitlines() if "Used " in l), "?"
            )
            spill = "0 spills" if "0 bytes spill stores, 0 bytes spill loads" in log else "SPILLS"
            print(f"-- ptxas sm_{sm}: {regs}, {spill}")
    args, grid = load_npz_args(INPUTS)
    start = time.perf_counter()
    module = parse_module(KERNEL.read_text(), shown(KERNEL))
    out = run_ptxsim(module, args, grid or (1, 1, 1), "sm_90")
    elapsed = time.perf_counter() - start
    problems = compare_expected(out, load_npz_expected(INPUTS), rtol=1e-5, atol=1e-6)
    print(
        "-- ptxsim: "
        + ("output matches cuTile's expected values" if not problems else "; ".join(problems))
        + f" ({elapsed * 1000:.0f} ms)"
    )
    return not problems


def main() -> int:
    print("tilegen demo: a spec-driven compiler for CUDA Tile IR")
    ok = stage_print()
    if ok:
        ok = stage_generic() and ok
    ok = stage_diagnostic() and ok
    if ok:
        ok = stage_bytecode() and ok
    if ok:
        ok = stage_run() and ok
    if ok:
        ok = stage_lower() and ok
    if ok:
        ok = stage_ptx() and ok
    print("\n" + ("demo OK" if ok else "demo FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
