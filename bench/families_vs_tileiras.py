"""Registers and spills of the issue-15 kernels (tests/cutile_kernels_lib.py), tilegen beside
NVIDIA's tileiras, per target.

``python bench/families_vs_tileiras.py [KERNEL ...] [--arch sm_90 ...] [--gemm-tiles]
[--json OUT]``

Each kernel is exported to bytecode through cuTile's compilation API (as the tests do), then
compiled by tilegen (``compile_to_ptx`` + ``ptxas -v``: registers, spill bytes) and by
tileiras (its cubin read with ``cuobjdump -res-usage``: REG, STACK, threads from
bench/cubin_info.py). ``--gemm-tiles`` adds the block-scaled fp8 GEMM at 64x64, 64x128,
128x64 and 128x128 tiles (M x N x 128). A tileiras failure (fp8 on sm_80) is printed as its
first error line; so is a tilegen one.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from codegen_status import parse_ptxas_v  # noqa: E402
from codegen_vs_tileiras import nvidia_tool  # noqa: E402

ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")


def export(case, params=None) -> bytes:
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    import cutile_kernels_lib as lib

    if params is None:
        return lib.export_bytecode(case)
    buf = io.BytesIO()
    sig = KernelSignature(params, CallingConvention.cutile_python_v1())
    export_kernel(
        case.kernel,
        [sig],
        buf,
        gpu_code=None,
        output_format="tileir_bytecode",
        bytecode_version="13.4",
    )
    return buf.getvalue()


def tilegen_row(path: Path, arch: str) -> dict:
    from tilegen.runtime.codegen.driver import PtxasError, assemble
    from tilegen.runtime.ptxsim import compile_to_ptx
    from tilegen.runtime.interp.api import RunError, load_module

    try:
        ptx = compile_to_ptx(load_module(path), arch)
    except RunError as e:
        return {"ok": False, "error": e.diagnostics[0].message[:100]}
    try:
        _, log = assemble(ptx, int(arch[3:]), verbose=True)
    except PtxasError as e:
        return {"ok": False, "error": str(e).splitlines()[-1][:100]}
    regs, st, ld = parse_ptxas_v(log)
    m = re.search(r"\.reqntid\s+(\d+)", ptx)
    return {"ok": True, "regs": regs, "spill": st, "spill_loads": ld, "threads": m and int(m[1])}


def tileiras_row(path: Path, arch: str, tools: dict, tmp: Path) -> dict:
    from cubin_info import only_kernel

    out = tmp / f"{path.stem}.{arch}.cubin"
    p = subprocess.run(
        [tools["tileiras"], f"--gpu-name={arch}", str(path), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0 or not out.exists():
        err = next((ln for ln in p.stderr.splitlines() if "error:" in ln), "failed")
        return {"ok": False, "error": err.split("error:")[-1].strip()[:100]}
    res = subprocess.run(
        [tools["cuobjdump"], "-res-usage", str(out)], capture_output=True, text=True
    )
    m = re.search(r"REG:(\d+) STACK:(\d+)", res.stdout)
    info = only_kernel(out.read_bytes())
    return {
        "ok": True,
        "regs": int(m[1]) if m else info.registers,
        "stack": int(m[2]) if m else None,
        "threads": info.threads,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kernels", nargs="*")
    p.add_argument("--arch", action="append", choices=ARCHS)
    p.add_argument("--gemm-tiles", action="store_true")
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)
    import cutile_kernels_lib as lib

    tools = {"tileiras": nvidia_tool("tileiras"), "cuobjdump": nvidia_tool("cuobjdump")}
    cases = lib.cases()
    names = args.kernels or list(cases)
    archs = args.arch or list(ARCHS)
    rows = []
    print(
        f"{'kernel':24s} {'arch':6s} {'tilegen regs/spill/thr':>24s}   {'tileiras regs/stack/thr':>24s}"
    )
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        jobs = [(n, cases[n], None) for n in names]
        if args.gemm_tiles:
            g = cases["fp8_block_gemm"]
            ex, _ = g.make_args(np.random.default_rng(0))
            base = lib.signature_params(g, ex)[:-3]
            for tm, tn in ((64, 64), (64, 128), (128, 64), (128, 128)):
                jobs.append((f"fp8_block_gemm_{tm}x{tn}", g, base + [tm, tn, 128]))
        for name, case, params in jobs:
            path = tmp / f"{name}.tileirbc"
            path.write_bytes(export(case, params))
            for arch in archs:
                tg = tilegen_row(path, arch)
                ti = (
                    tileiras_row(path, arch, tools, tmp)
                    if tools["tileiras"]
                    else {"ok": False, "error": "no tileiras"}
                )
                rows.append({"kernel": name, "arch": arch, "tilegen": tg, "tileiras": ti})
                a = f"{tg['regs']}/{tg['spill']}/{tg['threads']}" if tg["ok"] else tg["error"][:24]
                b = f"{ti['regs']}/{ti['stack']}/{ti['threads']}" if ti["ok"] else ti["error"][:24]
                print(f"{name:24s} {arch:6s} {a:>26s}   {b:>24s}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
