"""Shared-memory bank conflicts, tilegen beside tileiras, on the cuTile corpus (CPU only).

    python bench/smem_banks.py [--target sm_90] [--only NAME ...] [--lines N]

Each corpus kernel runs in the PTX simulator twice on its corpus inputs: tilegen's PTX
(``tilegen.compile`` for the target, ``a`` variant where the async path needs it) and
tileiras's (tests/ptx_corpus.py's captures, tileiras run here). runtime/ptx/sim/banks.py
counts every warp's shared-memory wavefronts per PTX line (ld/st.shared, ldmatrix,
stmatrix; not the tensor cores' or TMA's accesses) beside the fewest they could take (one a
phase). The table gives both compilers' totals and excess (bank-conflict) wavefronts;
``--lines N`` also prints tilegen's N worst lines per kernel. These are counts from the
documented bank structure, not timings."""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import ptx_corpus  # noqa: E402
from tilegen.runtime import driver  # noqa: E402
from tilegen.runtime.options import CompileOptions  # noqa: E402
from tilegen.runtime.ptx.launch import run_ptx  # noqa: E402
from tilegen.runtime.ptx.sim import banks  # noqa: E402

#: the async path's targets (tileiras's cubins are for the plain names)
ASYNC = {"sm_90": "sm_90a", "sm_100": "sm_100a", "sm_120": "sm_120"}


def _run(ptx: str, kernel: dict, maps=None, flags=()) -> tuple[dict, str]:
    args, names, data = ptx_corpus.arguments(kernel)
    lines: dict = {}
    try:
        outs = run_ptx(
            ptx,
            args,
            data["grid"],
            stdout=io.StringIO(),
            tensor_maps=maps,
            ptxas_flags=tuple(flags),
            bank_stats=lines,
        )
        ptx_corpus.check_outputs(kernel, names, args, outs, data)
    except Exception as e:  # noqa: BLE001 - reported in the table, the next kernel goes on
        return lines, f"{type(e).__name__}: {' '.join(str(e).split())[:80]}"
    return lines, "match"


def _totals(lines: dict) -> tuple[int, int]:
    return (
        sum(r["wavefronts"] for r in lines.values()),
        sum(r["phases"] for r in lines.values()),
    )


def _cell(lines: dict, status: str) -> str:
    if status != "match":
        return status
    w, p = _totals(lines)
    return f"{w:,} ({w - p:,} excess)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="sm_90", choices=sorted(ASYNC) + ["sm_80"])
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--lines", type=int, default=0, help="tilegen's worst lines per kernel")
    args = ap.parse_args(argv)
    if ptx_corpus.capture_all() is None:
        print("needs the cuTile corpus (../shared), the tileiras wheel and a C compiler")
        return 2
    target = ASYNC.get(args.target, args.target)
    out = [
        f"shared-memory wavefronts on {args.target} (tilegen for {target}), corpus inputs",
        "",
        "| kernel | tilegen | tileiras |",
        "|---|---:|---:|",
    ]
    details = []
    for k in ptx_corpus.kernels():
        name = k["name"]
        if args.only and name not in args.only:
            continue
        src = ptx_corpus.CORPUS / k["variants"]["default"]["file"]
        try:
            ptx = driver.compile_source(src, CompileOptions(target=target), until="ptx").ptx
            mine, status = _run(ptx, k)
        except Exception as e:  # noqa: BLE001 - a kernel tilegen refuses
            mine, status, ptx = {}, f"refused: {' '.join(str(e).split())[:60]}", ""
        theirs, their_status = {}, "tileiras refuses"
        if not ptx_corpus.tileiras_refuses(k, args.target):
            tptx, info = ptx_corpus.captured(name, args.target)
            if tptx is not None:
                theirs, their_status = _run(
                    tptx.read_text(), k, info.get("tensor_maps"), info.get("ptxas_flags", ())
                )
        if not mine and not theirs:
            continue
        out.append(f"| {name} | {_cell(mine, status)} | {_cell(theirs, their_status)} |")
        if args.lines and mine:
            details += ["", f"### {name} (tilegen)", "", banks.report(mine, ptx, args.lines)]
    print("\n".join(out + details))
    return 0


if __name__ == "__main__":
    sys.exit(main())
