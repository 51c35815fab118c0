#!/usr/bin/env python3
"""Memory and time of hostile inputs (not a test): ``python bench/hostile_input.py [CASE...]``.

Each case runs in a fresh child process that reads its input from a file, as the tools do, and
reports the wall and CPU time of the work, the peak RSS above the RSS it had after its imports
(``VmHWM`` after resetting it, see :func:`_reset_peak`), that growth divided by the input size, the bytes written to stderr and
the outcome (exit code or exception class). ``--tracemalloc`` adds tracemalloc's peak (slower).
``--warm`` first runs the same tool on the same kind of input without ops (``many_ops(0)``),
so the growth leaves out what any run loads or builds once (modules imported on first use,
format programs, caches): the way NVIDIA's tools are measured in docs/limits.md (peak RSS over
the same tool's on an empty module).

Cases (see ``CASES``): string literals of 1/3/10 MB, 100,000 ops (about 4 MB of text; also
through the bytecode round trip, and read from 0.7 MB of bytecode by ``tilegen-translate``), a 100 MB
random blob given to ``tilegen.compile`` (as text and behind a bytecode header), 100 MB of random
printable text (to ``tilegen.compile`` and ``tilegen-opt``), a 1 MB
identifier, a 5,000-digit integer literal, and 1,000 nested ``if``/``for`` through
``tilegen-opt`` and the ``tilegen-translate`` round trip. The targets (issue 17): memory growth
at most 20x the input, 100,000 ops in a few seconds, messages of bounded size.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

MB = 1 << 20

HEADER = "cuda_tile.module @kernels {\n  entry @k(%arg0: tile<i32>) {\n"
FOOTER = "    return\n  }\n}\n"


def string_literal(size: int) -> bytes:
    return (HEADER + '    %t = print_tko "' + "x" * size + '" -> token\n' + FOOTER).encode()


def many_ops(n: int) -> bytes:
    lines = [HEADER]
    prev = "%arg0"
    for i in range(n):
        lines.append(f"    %v{i} = addi {prev}, %arg0 : tile<i32>\n")
        prev = f"%v{i}"
    lines.append(FOOTER)
    return "".join(lines).encode()


def nested(kind: str, depth: int) -> bytes:
    """``depth`` nested ``if`` (or ``for``) ops, one ``addi`` in the innermost body."""
    out = [HEADER]
    if kind == "if":
        out.append("    %c = constant <i1: true> : tile<i1>\n")
        for _ in range(depth):
            out.append("if %c {\n")
        out.append("%x = addi %arg0, %arg0 : tile<i32>\n")
        out.append("}\n" * depth)
    else:
        out.append("    %lb = constant <i32: 0> : tile<i32>\n")
        out.append("    %ub = constant <i32: 2> : tile<i32>\n")
        out.append("    %st = constant <i32: 1> : tile<i32>\n")
        for i in range(depth):
            out.append(f"for %i{i} in (%lb to %ub, step %st) : tile<i32> {{\n")
        out.append("%x = addi %arg0, %arg0 : tile<i32>\n")
        out.append("continue\n}\n" * depth)
    out.append(FOOTER)
    return "".join(out).encode()


def long_identifier(size: int) -> bytes:
    return (HEADER + "    %r = addi %" + "a" * size + ", %arg0 : tile<i32>\n" + FOOTER).encode()


def big_integer(digits: int) -> bytes:
    return (
        HEADER + "    %c = constant <i32: " + "9" * digits + "> : tile<i32>\n" + FOOTER
    ).encode()


def as_bytecode(text: bytes) -> bytes:
    """``text`` written as bytecode (for the cases that read bytecode straight from a file)."""
    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.bytecode import write_bytecode

    return write_bytecode(parse_module(text.decode()))


def random_text(size: int) -> bytes:
    """Printable ASCII with newlines: valid UTF-8, so it reaches the lexer."""
    rng = random.Random(17)
    alphabet = bytes(range(32, 127)) + b"\n" * 4
    return bytes(rng.choice(alphabet) for _ in range(size // 64)) * 64


def random_blob(size: int, magic: bool) -> bytes:
    data = random.Random(17).randbytes(size)
    return (b"\x7fTileIR\x00\x0d\x04\x00\x00" + data[12:]) if magic else data


#: name -> (input builder, how it runs: "opt" | "roundtrip" | "bcread" | "compile")
CASES = {
    "string-1MB": (lambda: string_literal(1 * MB), "opt"),
    "string-3MB": (lambda: string_literal(3 * MB), "opt"),
    "string-10MB": (lambda: string_literal(10 * MB), "opt"),
    "ops-100k": (lambda: many_ops(100_000), "opt"),
    "ops-100k-bytecode": (lambda: many_ops(100_000), "roundtrip"),
    "ops-100k-read-bytecode": (lambda: as_bytecode(many_ops(100_000)), "bcread"),
    "blob-100MB": (lambda: random_blob(100 * MB, False), "compile"),
    "blob-100MB-bytecode": (lambda: random_blob(100 * MB, True), "compile"),
    "text-100MB": (lambda: random_text(100 * MB), "compile"),
    "text-100MB-opt": (lambda: random_text(100 * MB), "opt"),
    "identifier-1MB": (lambda: long_identifier(1 * MB), "opt"),
    "integer-5000-digits": (lambda: big_integer(5000), "opt"),
    "if-1000": (lambda: nested("if", 1000), "opt"),
    "for-1000": (lambda: nested("for", 1000), "opt"),
    "if-1000-bytecode": (lambda: nested("if", 1000), "roundtrip"),
    "for-1000-bytecode": (lambda: nested("for", 1000), "roundtrip"),
}


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> int:
    """Start measuring the peak RSS here; the RSS now (KiB).

    ``ru_maxrss`` cannot be used alone: Linux carries the parent's peak into a child across
    fork and exec, so a parent that built a 100 MB input would hide the child's first 100 MB.
    Writing 5 to ``/proc/self/clear_refs`` resets ``VmHWM`` to the current RSS (Linux 4.0+).
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return _status_kb("VmRSS") or 0


def _peak_kb() -> int:
    hwm = _status_kb("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _run(mode: str, path: str) -> str:
    """Run one case's tool (or API call) on ``path``; its outcome."""
    from tilegen.tools import opt, translate

    if mode == "opt":
        return f"exit {opt.main([path, '-o', os.devnull])}"
    if mode == "roundtrip":
        bc = path + ".tileirbc"
        rc = translate.main(["-mlir-to-cudatilebc", "-no-implicit-module", path, "-o", bc])
        if rc == 0:
            rc = translate.main(["-cudatilebc-to-mlir", bc, "-o", os.devnull])
        return f"exit {rc}"
    if mode == "bcread":
        return f"exit {translate.main(['-cudatilebc-to-mlir', path, '-o', os.devnull])}"
    if mode == "compile":
        import tilegen

        try:
            tilegen.compile(Path(path).read_bytes(), gpu_name="sm_90", cache=False)
            return "compiled"
        except tilegen.CompileError as e:
            return f"CompileError({e.exit_code})"
    raise ValueError(mode)


def _warm_up(mode: str, path: str) -> None:
    """Run ``mode``'s tool once on an input without ops (see ``--warm``)."""
    if mode == "compile":
        return
    text = many_ops(0)
    warm = path + ".warm"
    Path(warm).write_bytes(as_bytecode(text) if mode == "bcread" else text)
    with redirect_stderr(io.StringIO()), redirect_stdout(io.StringIO()):
        _run(mode, warm)
    for p in (warm, warm + ".tileirbc"):
        if os.path.exists(p):
            os.remove(p)


def child(case: str, path: str, use_tracemalloc: bool, warm: bool = False) -> dict:
    """Run one case in this process and report what it cost."""
    import tilegen  # noqa: F401 - imports happen before the baseline
    from tilegen.runtime.asm import parse_module  # noqa: F401
    from tilegen.runtime.bytecode import read_bytecode  # noqa: F401
    from tilegen.tools import opt, translate  # noqa: F401

    mode = CASES[case][1]
    size = os.path.getsize(path)
    if mode == "compile":
        from tilegen import api  # noqa: F401
    if warm:
        _warm_up(mode, path)
        gc.collect()
    base = _reset_peak()
    if use_tracemalloc:
        import tracemalloc

        tracemalloc.start()
    err = io.StringIO()
    t0, c0 = time.perf_counter(), time.process_time()
    outcome = ""
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        try:
            outcome = _run(mode, path)
        except BaseException as e:  # noqa: BLE001 - report whatever escaped
            outcome = f"{type(e).__name__}"
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    result = {
        "case": case,
        "input_bytes": size,
        "seconds": round(seconds, 2),
        "cpu_s": round(cpu, 2),
        "rss_growth_mb": round((_peak_kb() - base) / 1024, 1),
        "ratio": round((_peak_kb() - base) * 1024 / max(size, 1), 1),
        "stderr_bytes": len(err.getvalue()),
        "outcome": outcome,
        "first_error": err.getvalue().split("\n", 1)[0][:160],
    }
    if use_tracemalloc:
        import tracemalloc

        result["tracemalloc_peak_mb"] = round(tracemalloc.get_traced_memory()[1] / MB, 1)
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("cases", nargs="*", help=f"default: all of {', '.join(CASES)}")
    ap.add_argument("--tracemalloc", action="store_true", help="also report tracemalloc's peak")
    ap.add_argument(
        "--warm",
        action="store_true",
        help="measure growth over a first run of the same tool on an input without ops",
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per case")
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    ap.add_argument("--child", metavar="CASE", help=argparse.SUPPRESS)
    ap.add_argument("--input", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.input, args.tracemalloc, args.warm)))
        return 0
    names = args.cases or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"unknown case(s): {', '.join(unknown)}")
    cols = ("case", "input_bytes", "seconds", "cpu_s", "rss_growth_mb", "ratio", "stderr_bytes")
    if not args.json:
        print(" | ".join(cols + ("outcome",)))
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = os.path.join(tmp, name + ".mlir")
            Path(path).write_bytes(CASES[name][0]())
            cmd = [sys.executable, __file__, "--child", name, "--input", path]
            if args.tracemalloc:
                cmd.append("--tracemalloc")
            if args.warm:
                cmd.append("--warm")
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                lines = proc.stdout.strip().splitlines()
                row = (
                    json.loads(lines[-1])
                    if lines
                    else {"case": name, "outcome": proc.stderr[-300:]}
                )
            except subprocess.TimeoutExpired:
                row = {"case": name, "outcome": f"timeout after {args.timeout:.0f} s"}
            os.remove(path)
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                vals = [str(row.get(c, "")) for c in cols]
                extra = row.get("outcome", "")
                if "tracemalloc_peak_mb" in row:
                    extra += f" tracemalloc={row['tracemalloc_peak_mb']}MB"
                print(" | ".join(vals + [extra]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
