"""tilegen's async path (docs/pipelines.md) on the tensor-core kernels, per target.

``python bench/async_pipeline_table.py [--targets sm_90a sm_100a] [--markdown]``

For every corpus kernel that uses ``mmaf``/``mmai`` and the kernels of
tests/cutile_kernels_async.py (exported with cuTile when it is installed), compiles with
tilegen for each target and reports: the async stage's decision (taken, or today's path and
why), the stages, threads, registers and shared memory (``ptxas -v``, spills), the SASS mix
(UTMALDG, UTMASTG, SYNCS, HGMMA/IGMMA/QGMMA, UTCHMMA/UTC*MMA, UTCBAR, USETMAXREG, HMMA,
LDGSTS), the epilogue's store (TMA or st.global) and
whether the simulator reproduces the expected outputs in its strict async mode.
tileiras's numbers for the same kernels are the table of docs/pipelines.md section 3
(bench/tileiras_pipelines.py).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

SASS = ("UTMALDG", "UTMASTG", "SYNCS", "HGMMA", "IGMMA", "QGMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA")
SASS += ("UTCBAR", "USETMAXREG", "HMMA", "DMMA", "LDGSTS")


def _kernels(tmp: Path) -> dict:
    """name -> (bytecode path, args, expected, grid, rtol, atol)."""
    from paths import CORPUS_OUT

    out = {}
    for mlir in sorted(CORPUS_OUT.glob("*.mlir")):
        if ".v13" in mlir.name or not re.search(r"\bmma[fi]\b", mlir.read_text()):
            continue
        data = np.load(mlir.with_suffix(".npz"))
        args = [np.array(data[k]) for k in data.files if k.startswith("arg__")]
        exp = {
            i: data["expected__" + k[5:]]
            for i, k in enumerate(k for k in data.files if k.startswith("arg__"))
            if "expected__" + k[5:] in data.files
        }
        out[mlir.stem] = (mlir.with_suffix(".tileirbc"), args, exp, tuple(data["grid"]), 1e-3, 1e-3)
    try:
        import cutile_kernels_async as cka
    except ImportError:
        return out
    try:
        paths = cka.export_bytecode(str(tmp))
    except Exception as e:  # noqa: BLE001 - cuTile missing or failing: corpus only
        print(f"# cuTile kernels skipped: {e}", file=sys.stderr)
        return out
    problems = dict(cka.problems())
    # the num_ctas=2 GEMMs: CTA pairs (docs/pipelines.md sections 18-19)
    paths.update(cka.export_pair_bytecode(str(tmp), list(cka.PAIR_SHAPES)))
    problems.update({name: cka.pair_problem(name) for name in cka.PAIR_SHAPES})
    for name, pr in problems.items():
        names = list(pr.args)
        exp = {names.index(k): v for k, v in pr.expected.items()}
        args = [np.asarray(v) for v in pr.args.values()]
        out[name] = (Path(paths[name]), args, exp, tuple(pr.grid), pr.rtol, pr.atol)
    return out


def measure(name, entry, target: str, tmp: Path) -> dict:
    from tilegen.runtime import driver
    from tilegen.runtime.diagnostics import CompileError
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.ptx.launch import run_ptx
    from tilegen.runtime.ptxas import find_ptxas
    from tilegen.runtime.targets import EXTENDED_SMEM_FLAG

    path, args, exp, grid, rtol, atol = entry
    row = {"kernel": name, "target": target}
    try:
        c = driver.compile_source(path, CompileOptions(target=target), until="ptx")
    except CompileError as e:
        row["error"] = str(e.diagnostics[0].message)[:80]
        return row
    d = c.async_plan[0]
    row["path"] = ("async, CTA pair" if d.cta_pair else "async") if d.taken else "today's"
    row["why"] = "" if d.taken else d.reason
    row["stages"] = d.stages if d.taken else "-"
    row["store"] = ("TMA" if d.tma_store else "st.global") if d.taken else "-"
    ptxas = find_ptxas()
    src, cubin = tmp / f"{name}.{target}.ptx", tmp / f"{name}.{target}.cubin"
    src.write_text(c.ptx)
    p = subprocess.run(
        [ptxas, "-v", f"-arch={target}", EXTENDED_SMEM_FLAG, str(src), "-o", str(cubin)],
        capture_output=True,
        text=True,
    )
    if p.returncode:
        row["error"] = p.stderr.strip().splitlines()[-1][:80]
        return row
    m = re.search(r"Used (\d+) registers.*?(\d+) bytes smem", p.stderr)
    row["regs"], row["smem"] = (int(m.group(1)), int(m.group(2))) if m else ("?", "?")
    row["spills"] = "0 bytes spill stores, 0 bytes spill loads" not in p.stderr
    threads = re.search(r"\.reqntid (\d+)", c.ptx)
    row["threads"] = int(threads.group(1)) if threads else "?"
    dump = subprocess.run(
        [str(Path(ptxas).with_name("cuobjdump")), "-sass", str(cubin)],
        capture_output=True,
        text=True,
    ).stdout
    ops = re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9]+)", dump)
    row["sass"] = {k: sum(1 for o in ops if o == k) for k in SASS}
    try:
        outs = run_ptx(
            c.ptx, [a.copy() for a in args], grid + (1,) * (3 - len(grid)), strict_async=True
        )
        ok = all(
            np.allclose(
                np.asarray(outs[i], np.float64),
                np.asarray(v, np.float64),
                rtol=rtol,
                atol=atol,
                equal_nan=True,
            )
            for i, v in exp.items()
        )
        row["ptxsim"] = "strict " + ("match" if ok else "MISMATCH")
    except Exception as e:  # noqa: BLE001
        row["ptxsim"] = f"error: {str(e)[:60]}"
    return row


def markdown(rows) -> str:
    head = "| kernel | target | path | stages | store | threads | regs | smem | spills | "
    head += " | ".join(("UTMALDG", "UTMASTG", "SYNCS", "GMMA", "UTC*MMA", "UTCBAR", "USETMAXREG"))
    head += " | HMMA/DMMA | LDGSTS | ptxsim |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['kernel']} | {r['target']} | error: {r['error']} |")
            continue
        s = r["sass"]
        g = s["HGMMA"] + s["IGMMA"] + s["QGMMA"]
        u = s["UTCHMMA"] + s["UTCQMMA"] + s["UTCIMMA"]
        path = r["path"] if not r["why"] else f"today's ({r['why'][:90]})"
        lines.append(
            f"| {r['kernel']} | {r['target']} | {path} | {r['stages']} | {r['store']} | "
            f"{r['threads']} | {r['regs']} | {r['smem']} | {'YES' if r['spills'] else 0} | "
            f"{s['UTMALDG']} | {s['UTMASTG']} | "
            f"{s['SYNCS']} | {g} | {u} | {s['UTCBAR']} | {s['USETMAXREG']} | "
            f"{s['HMMA'] + s['DMMA']} | {s['LDGSTS']} | {r['ptxsim']} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", nargs="+", default=["sm_90a", "sm_100a"])
    ap.add_argument("--kernels", nargs="*")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        ks = _kernels(tmp)
        rows = []
        for name, entry in ks.items():
            if a.kernels and name not in a.kernels:
                continue
            for target in a.targets:
                rows.append(measure(name, entry, target, tmp))
                if not a.markdown:
                    print(rows[-1], flush=True)
    if a.markdown:
        print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
