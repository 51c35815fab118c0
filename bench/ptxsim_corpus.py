"""tileiras's PTX for the cuTile corpus in the SIMT simulator: which kernels x targets run and
match the expected outputs, and how long each takes (process CPU time, best of --repeat).

    python bench/ptxsim_corpus.py [--targets sm_80,sm_90,sm_100,sm_120] [--strict]
                                  [--repeat 1] [--only NAME...]

The PTX comes from tests/ptx_corpus.py's captures (tileiras run here, never committed)."""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import ptx_corpus  # noqa: E402
from tilegen.runtime.ptx.launch import run_ptx  # noqa: E402


def run_case(kernel: dict, arch: str, strict: bool) -> str:
    ptx, info = ptx_corpus.captured(kernel["name"], arch)
    if ptx is None:
        return "tileiras refuses"
    args, names, data = ptx_corpus.arguments(kernel)
    try:
        outs = run_ptx(
            ptx.read_text(),
            args,
            data["grid"],
            file=ptx.name,
            stdout=io.StringIO(),
            tensor_maps=info.get("tensor_maps"),
            ptxas_flags=tuple(info.get("ptxas_flags", ())),
            strict_async=strict,
        )
        ptx_corpus.check_outputs(kernel, names, args, outs, data)
    except AssertionError as e:
        return "MISMATCH " + " ".join(str(e).split())[:120]
    except Exception as e:  # a simulator error: report it, go on
        return "ERROR " + " ".join(str(e).split())[:160]
    return "match"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", default=",".join(ptx_corpus.TARGETS))
    ap.add_argument("--strict", action="store_true", help="the strict async mode")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", nargs="*", default=[])
    args = ap.parse_args()
    if ptx_corpus.capture_all() is None:
        print("needs the cuTile corpus (../shared), the tileiras wheel and a C compiler")
        return 2
    targets = args.targets.split(",")
    rows, total = [], 0.0
    for k in ptx_corpus.kernels():
        if args.only and k["name"] not in args.only:
            continue
        for arch in (*targets, *ptx_corpus.EXTRA.get(k["name"], ())):
            if ptx_corpus.tileiras_refuses(k, arch):
                continue
            best = None
            for _ in range(args.repeat):
                t0 = time.process_time()
                status = run_case(k, arch, args.strict)
                dt = time.process_time() - t0
                best = dt if best is None else min(best, dt)
            total += best
            rows.append((f"{k['name']}.{arch}", status, best))
    print("| kernel.target | result | CPU s |\n|---|---|---|")
    for name, status, dt in rows:
        print(f"| {name} | {status} | {dt:.2f} |")
    ok = sum(1 for _, s, _ in rows if s == "match")
    per = {}
    for name, status, _ in rows:
        arch = name.rsplit(".", 1)[1]
        per.setdefault(arch, [0, 0])
        per[arch][0] += status == "match"
        per[arch][1] += 1
    by = ", ".join(f"{a}: {m}/{n}" for a, (m, n) in sorted(per.items()))
    mode = "strict async" if args.strict else "default"
    print(f"\n{ok}/{len(rows)} kernels x targets match ({by}); {mode} mode; {total:.1f} s CPU")
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
