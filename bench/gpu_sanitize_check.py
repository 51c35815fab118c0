"""tilegen's ``--sanitize=memcheck`` and NVIDIA's compute-sanitizer on a real GPU.

``python bench/gpu_sanitize_check.py build [--payload build/gpu-check]`` (CPU machine, after
``make gpu-check``): writes ``PAYLOAD/sanitize/``: the corpus raw_pointer kernel built by
tilegen with ``--sanitize=memcheck`` for sm_90, its corpus inputs, and the same inputs with a
planted out-of-bounds read (``n = 320`` over a 600-element ``x``: ``x[2 i + 1]`` for ``i < n``).

``python3 PAYLOAD/sanitize/gpu_sanitize_check.py run PAYLOAD`` (GPU machine): launches both
(the runner's ctypes driver), then runs the payload's async-path corpus GEMMs (both compilers'
cubins) under ``compute-sanitizer --tool memcheck`` and ``--tool synccheck`` when it is on the
PATH. Prints one line per check; the planted run must fail with the kernel's trap.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ASYNC_KERNELS = ("matmul_f16", "matmul_fp8", "matmul_int8", "matmul_tf32")


def build(payload: Path) -> None:
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "tests"))
    import tilegen
    from paths import CORPUS_OUT

    out = payload / "sanitize"
    out.mkdir(parents=True, exist_ok=True)
    src = CORPUS_OUT / "raw_pointer.tileirbc"
    cubin = tilegen.compile(src.read_bytes(), gpu_name="sm_90", sanitize="memcheck").cubin
    (out / "raw_pointer.sm_90.memcheck.cubin").write_bytes(cubin)
    d = dict(np.load(CORPUS_OUT / "raw_pointer.npz"))
    np.savez(out / "in_bounds.npz", **d)
    d["arg__n"] = np.array(320, np.int32)
    d = {k: v for k, v in d.items() if not k.startswith("expected__")}
    np.savez(out / "planted.npz", **d)
    shutil.copy(__file__, out / Path(__file__).name)
    print(f"wrote {out}")


def run(payload: Path) -> int:
    sys.path.insert(0, str(payload))
    import runner  # the payload's copy of bench/gpu_runner.py

    out = payload / "sanitize"
    cubin = (out / "raw_pointer.sm_90.memcheck.cubin").read_bytes()
    dev = runner.Driver()
    args, expected, grid = runner.load_npz(out / "in_bounds.npz")
    got, _ = dev.run(cubin, args, grid, 0)
    bad = runner.compare(got, expected, 1e-6, 1e-6)
    print(f"memcheck build, in bounds: {'correct' if not bad else bad}", flush=True)
    args, _, grid = runner.load_npz(out / "planted.npz")
    try:  # a trap ends the context: last
        dev.run(cubin, args, grid, 0)
        print("memcheck build, planted out-of-bounds read: NOT caught (the launch succeeded)")
    except runner.RunnerError as e:
        print(f"memcheck build, planted out-of-bounds read: caught, the launch failed: {e}")
    sys.stdout.flush()
    tool = shutil.which("compute-sanitizer")
    if tool is None:
        print("compute-sanitizer: not on the PATH")
        return 0
    for kernel in ASYNC_KERNELS:
        for check in ("memcheck", "synccheck"):
            cmd = [tool, "--tool", check, sys.executable, str(payload / "runner.py")]
            cmd += [str(payload), "--worker", f"corpus:{kernel}", "--repeat", "1"]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            summary = [x for x in p.stdout.splitlines() if "ERROR SUMMARY" in x]
            rows = [x for x in p.stdout.splitlines() if x.startswith("{")]
            print(
                f"compute-sanitizer {check} {kernel}: {summary[-1:] or p.stderr[-300:]} {rows[-1:]}"
            )
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=("build", "run"))
    p.add_argument("payload", nargs="?", type=Path, default=Path("build/gpu-check"))
    a = p.parse_args(argv)
    if a.mode == "build":
        build(a.payload)
        return 0
    return run(a.payload)


if __name__ == "__main__":
    sys.exit(main())
