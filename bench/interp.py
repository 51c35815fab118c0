"""Interpreter time for corpus kernels: ``python bench/interp.py [KERNEL ...] [--repeat N]``.

Runs each kernel's default (13.4) bytecode over its recorded grid and inputs, checks the result
against the expected outputs, and prints load and run times (median of N runs), the number of ops
executed and ops per second.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from tilegen.runtime.interp.api import find_entry, load_module, load_npz_args, module_of
from tilegen.runtime.interp.calling import flatten_args, param_types, read_back
from tilegen.runtime.interp.executor import Machine, allocate_globals, run_kernel
from tilegen.runtime.interp.memory import Heap

from tilegen.runtime.paths import corpus_dir  # noqa: E402  (../shared or $TILEGEN_SHARED)

CORPUS = corpus_dir()
DEFAULT = ["softmax", "layernorm", "matmul_f16"]


def bench(name: str, repeat: int) -> dict:
    kernel = next(
        k
        for k in json.loads((CORPUS / "manifest.json").read_text())["kernels"]
        if k["name"] == name
    )
    path = CORPUS / "out" / f"{name}.tileirbc"
    t0 = time.perf_counter()
    module = load_module(path)
    load_s = time.perf_counter() - t0
    args, grid = load_npz_args(CORPUS / "out" / f"{name}.npz")
    entry = find_entry(module)
    times, ops, result = [], 0, {}
    for _ in range(repeat):
        heap = Heap()
        machine = Machine(heap=heap, grid=tuple(grid), stdout=io.StringIO())
        allocate_globals(machine, module_of(entry))
        flat, bindings = flatten_args(param_types(entry), args, heap)
        t0 = time.perf_counter()
        run_kernel(machine, entry, flat)
        times.append(time.perf_counter() - t0)
        ops = machine.ops_executed
        result = {b.name: read_back(heap, b) for b in bindings}
    rtol, atol = kernel["tolerance_rtol_atol"]
    with np.load(CORPUS / "out" / f"{name}.npz") as d:
        ok = all(
            np.allclose(
                result[k[10:]].astype(np.float64), d[k].astype(np.float64), rtol=rtol, atol=atol
            )
            for k in d.files
            if k.startswith("expected__")
        )
    run_s = statistics.median(times)
    return {
        "kernel": name,
        "grid": list(grid),
        "load_s": load_s,
        "run_s": run_s,
        "ops_executed": ops,
        "ops_per_s": ops / run_s if run_s else 0.0,
        "matches": ok,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="*", default=DEFAULT)
    ap.add_argument("--all", action="store_true", help="every corpus kernel the verifier accepts")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    names = a.kernels
    if a.all:
        manifest = json.loads((CORPUS / "manifest.json").read_text())["kernels"]
        names = [k["name"] for k in manifest if not k.get("expect_tileiras_fail")]
    rows = [bench(k, a.repeat) for k in names]
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        print(
            f"{'kernel':<18} {'grid':<10} {'load ms':>8} {'run ms':>8} {'ops':>7} {'ops/s':>9}  ok"
        )
        for r in rows:
            g = "x".join(str(x) for x in r["grid"])
            print(
                f"{r['kernel']:<18} {g:<10} {r['load_s'] * 1e3:8.1f} {r['run_s'] * 1e3:8.1f} "
                f"{r['ops_executed']:7d} {r['ops_per_s']:9.0f}  {'yes' if r['matches'] else 'NO'}"
            )
    return 0 if all(r["matches"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
