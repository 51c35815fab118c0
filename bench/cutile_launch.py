"""Wall time of ``tilegen.cutile.launch`` on the CPU: first call (cuTile export, tilegen read +
verify, PTX for ptxsim; imports included when this is the process's first launch) and cached
calls, per backend.

``python bench/cutile_launch.py [--case softmax] [--repeat 5]``

Each backend runs in a fresh process so that its first call pays the imports a user's first
call pays. Prints one row per backend: first call, median cached call, and the first call's
breakdown (export / load / ptx).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
sys.path.insert(0, {tests!r})
from cutile_kernels import kernels, launch_cases
from tilegen.cutile import launch
import tilegen.cutile_launch as cl
case = next(c for c in launch_cases() if c.name == {case!r})
kernel = kernels()[case.kernel].kernel
grid, args = case.make(np.random.default_rng(0))
t1 = time.perf_counter()
launch(grid, kernel, args, backend={backend!r})
first = time.perf_counter() - t1
times = []
for _ in range({repeat}):
    t = time.perf_counter()
    launch(grid, kernel, args, backend={backend!r})
    times.append(time.perf_counter() - t)
entry = next(iter(cl._CACHE.values()))
print(json.dumps({{"imports": t1 - t0, "first": first, "cached": times,
                  "breakdown": entry.seconds}}))
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", default="softmax", help="a case of tests/cutile_kernels.py")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    print(f"case {args.case}: wall seconds")
    print(f"{'backend':8s} {'imports':>8s} {'first':>8s} {'cached':>8s}  first call breakdown")
    for backend in ("interp", "ptxsim"):
        code = CHILD.format(
            tests=str(ROOT / "tests"), case=args.case, backend=backend, repeat=args.repeat
        )
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if out.returncode:
            print(f"{backend}: failed\n{out.stderr[-2000:]}")
            return 1
        r = json.loads(out.stdout.strip().splitlines()[-1])
        parts = ", ".join(f"{k} {v:.2f}" for k, v in r["breakdown"].items())
        print(
            f"{backend:8s} {r['imports']:8.2f} {r['first']:8.2f} "
            f"{statistics.median(r['cached']):8.3f}  {parts}  (process {time.perf_counter() - t:.1f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
