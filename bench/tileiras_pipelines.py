"""What NVIDIA's tileiras does with tensor-core kernels: TMA, mbarrier pipelines, warp groups.

``python bench/tileiras_pipelines.py [--arch sm_90 sm_100] [--kernels K ...] [--json OUT]
[--keep DIR] [--markdown]``

For every corpus kernel that uses ``mmaf``/``mmai`` (and the kernels of
tests/cutile_kernels_async.py, exported with cuTile when it is installed) and each target, runs
``tileiras`` with a ``ptxas`` wrapper that keeps the PTX and the ``--nv-host`` object it is
given (the trick of docs/tensor_cores.md), then measures the cubin:

* SASS instruction mix from ``cuobjdump -sass``: UTMALDG, UTMASTG, SYNCS, HGMMA/IGMMA/QGMMA,
  UTCHMMA/UTCQMMA/UTCIMMA (tcgen05), UTCBAR, USETMAXREG, HMMA, LDGSTS, total;
* registers and shared memory from ``cuobjdump -res-usage``; threads from ``.reqntid``;
* from the PTX: mbarrier objects and their arrival counts, TMA copies, ``setmaxnreg`` values,
  the MMA instruction shapes, the stage count (the ring size of the stage index: the
  ``mul.lo`` by the constant that follows a reciprocal multiply, or the number of barriers
  per ring);
* the tensor maps of the host object (box, swizzle; runtime/ptx/nv_host.py).

Used to write the tileiras table of docs/pipelines.md. Needs the ``nvidia`` cu13 wheels (the
``oracles`` extra) and, for the host object, a C compiler.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

CORPUS_MMA = (
    "matmul_f16",
    "matmul_tf32",
    "matmul_int8",
    "matmul_fp8",
    "matmul_f64",
    "batched_matmul",
    "flash_attention",
)
SASS_KEYS = (
    "UTMALDG",
    "UTMASTG",
    "UTMAPF",
    "SYNCS",
    "HGMMA",
    "IGMMA",
    "QGMMA",
    "UTCHMMA",
    "UTCQMMA",
    "UTCIMMA",
    "UTCBAR",
    "USETMAXREG",
    "HMMA",
    "IMMA",
    "DMMA",
    "LDGSTS",
    "LDSM",
)


def shared_dir() -> Path:
    env = os.environ.get("TILEGEN_SHARED")
    return Path(env) if env else ROOT.parent / "shared"


def nvidia_bin() -> Path:
    for cand in Path(sys.prefix).glob("lib/python3*/site-packages/nvidia/cu13/bin"):
        return cand
    raise SystemExit("the nvidia cu13 wheels are not installed (pip install -e '.[oracles]')")


def wrapper(tmp: Path) -> Path:
    """A copy of tileiras whose sibling ``ptxas`` keeps its inputs in $CAPTURE_DIR."""
    b = nvidia_bin()
    root = tmp / "tw"
    (root / "bin").mkdir(parents=True)
    for entry in b.parent.iterdir():
        if entry.name != "bin":
            (root / entry.name).symlink_to(entry)
    for entry in b.iterdir():
        if entry.name not in ("ptxas", "tileiras"):
            (root / "bin" / entry.name).symlink_to(entry)
    shutil.copy2(b / "tileiras", root / "bin" / "tileiras")
    script = root / "bin" / "ptxas"
    script.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do\n'
        '  case "$a" in\n'
        '    *.ptx) cp "$a" "$CAPTURE_DIR/k.ptx";;\n'
        '    --nv-host=*) cp "${a#--nv-host=}" "$CAPTURE_DIR/host.o";;\n'
        "  esac\n"
        "done\n"
        f'exec "{b / "ptxas"}" "$@"\n'
    )
    script.chmod(0o755)
    return root / "bin" / "tileiras"


def sass_mix(sass: str) -> dict:
    ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)", sass)
    c = Counter(ops)
    out = {k: c.get(k, 0) for k in SASS_KEYS}
    out["total"] = sum(c.values())
    return out


def res_usage(text: str) -> dict:
    m = re.search(r"REG:(\d+).*?SHARED:(\d+)", text)
    return {"regs": int(m.group(1)), "smem": int(m.group(2))} if m else {}


def ptx_facts(ptx: str) -> dict:
    facts: dict = {}
    m = re.search(r"\.reqntid\s+(\d+)(?:,\s*(\d+))?(?:,\s*(\d+))?", ptx)
    threads = 1
    if m:
        for g in m.groups():
            threads *= int(g) if g else 1
    facts["threads"] = threads if m else None
    # mbarrier.init [addr], count  -> the count register's value
    movs = dict(re.findall(r"mov\.b32\s+(%r\d+),\s*(\d+);", ptx))
    inits = re.findall(
        r"mbarrier\.init\.shared(?:::cta)?\.b64\s+\[[^\]]*?\+?(\d*)\],\s*(%r\d+|\d+);", ptx
    )
    counts = Counter(int(movs.get(c, c)) if not c.isdigit() else int(c) for _, c in inits)
    facts["mbarriers"] = sum(counts.values())
    facts["mbarrier_counts"] = dict(sorted(counts.items()))
    facts["tma_loads"] = len(
        re.findall(r"cp\.async\.bulk\.tensor\.\d+d\.shared::c\w+\.global", ptx)
    )
    facts["tma_stores"] = len(re.findall(r"cp\.async\.bulk\.tensor\.\d+d\.global\.shared", ptx))
    facts["setmaxnreg"] = sorted(
        {
            f"{k}{v}"
            for k, v in re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx)
        }
    )
    facts["mma"] = sorted(
        set(
            re.findall(r"(wgmma\.mma_async\.sync\.aligned\.\w+\.\w+\.\w+\.\w+)", ptx)
            + re.findall(r"(tcgen05\.mma\.cta_group::\d\.kind::\w+)", ptx)
            + re.findall(r"(mma\.sync\.aligned\.\w+\.row\.col[\w.]*)", ptx)
        )
    )
    facts["tcgen05"] = sorted(set(re.findall(r"tcgen05\.(\w+)", ptx)))
    facts["fence_proxy_async"] = len(re.findall(r"fence\.proxy\.async", ptx))
    # stage ring: `mul.hi.u32 q, i, MAGIC; shr.u32 q, q, S; ... mul.lo.s32 t, q, N; sub` -> N
    rings = [int(n) for n in re.findall(r"mul\.lo\.s32\s+%r\d+,\s*%r\d+,\s*(\d+);\s*\n\s*sub", ptx)]
    # power-of-two rings are `and.b32 x, x, N-1` after an add; recorded when no modulus is found
    facts["stage_ring"] = sorted(set(rings))
    facts["smem_decl"] = sum(
        int(n) for n in re.findall(r"\.shared\s+\.align\s+\d+\s+\.b8\s+\w+\[(\d+)\]", ptx)
    )
    return facts


def host_maps(host: Path, ptx: str, ranks: list[int]) -> list | str:
    try:
        from tilegen.runtime.ptx.nv_host import HostMapError, tensor_maps
    except ImportError as e:  # pragma: no cover
        return f"nv_host unavailable: {e}"
    try:
        return tensor_maps(host, ptx, ranks)
    except (HostMapError, OSError) as e:
        return f"{type(e).__name__}: {e}"


def array_ranks(ptx: str) -> list[int]:
    """Ranks of the kernel's runtime parameters (0 for scalars), from cuTile's mangled entry
    name: ``_A<rank><dtype>_...`` per array, ``_S<dtype>`` per scalar, ``_I..`` constants."""
    m = re.search(r"\.entry\s+(\w+)", ptx)
    ranks = []
    for tok in (m.group(1).split("_") if m else []):
        if re.fullmatch(r"A\d+[a-z]+\d*", tok):
            ranks.append(int(re.match(r"A(\d+)", tok).group(1)))
        elif re.fullmatch(r"S[a-z]+\d+", tok):
            ranks.append(0)
    return ranks


def study(name: str, bc: Path, arch: str, tileiras: Path, keep: Path) -> dict:
    b = nvidia_bin()
    cap = keep / f"{name}.{arch}"
    cap.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CAPTURE_DIR=str(cap))
    cubin = cap / "k.cubin"
    p = subprocess.run(
        [str(tileiras), f"--gpu-name={arch}", str(bc), "-o", str(cubin)],
        capture_output=True,
        text=True,
        env=env,
    )
    row: dict = {"kernel": name, "arch": arch}
    if p.returncode != 0:
        row["error"] = (p.stderr.strip().splitlines() or ["?"])[-1]
        return row
    sass = subprocess.run(
        [str(b / "cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True
    ).stdout
    (cap / "k.sass").write_text(sass)
    res = subprocess.run(
        [str(b / "cuobjdump"), "-res-usage", str(cubin)], capture_output=True, text=True
    ).stdout
    row.update(res_usage(res))
    row["sass"] = sass_mix(sass)
    ptx = (cap / "k.ptx").read_text()
    row.update(ptx_facts(ptx))
    host = cap / "host.o"
    if host.exists() and ".hidden" in ptx:
        try:
            row["tensor_maps"] = host_maps(host, ptx, array_ranks(ptx))
        except Exception as e:  # noqa: BLE001 - a study script records what it cannot read
            row["tensor_maps"] = f"{type(e).__name__}: {e}"
    return row


def kernel_files(names, tmp: Path) -> dict[str, Path]:
    out = {}
    corpus = shared_dir() / "corpus" / "cutile" / "out"
    for k in CORPUS_MMA:
        if (corpus / f"{k}.tileirbc").exists():
            out[k] = corpus / f"{k}.tileirbc"
    try:
        sys.path.insert(0, str(ROOT / "tests"))
        import cutile_kernels_async

        out.update({k: Path(v) for k, v in cutile_kernels_async.export_bytecode(str(tmp)).items()})
    except ImportError as e:
        print(f"note: cuTile kernels skipped ({e})", file=sys.stderr)
    if names:
        out = {k: v for k, v in out.items() if k in names}
    return out


def markdown(rows: list[dict]) -> str:
    head = (
        "| kernel | arch | threads | regs | smem (B) | stages | UTMALDG | SYNCS | GMMA (H/I/Q) "
        "| UTC*MMA | UTCBAR | USETMAXREG | setmaxnreg | mma | TMA boxes (swizzle) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['kernel']} | {r['arch']} | {r['error']} |" + " |" * 13)
            continue
        s = r["sass"]
        gm = f"{s['HGMMA']}/{s['IGMMA']}/{s['QGMMA']}"
        utc = s["UTCHMMA"] + s["UTCQMMA"] + s["UTCIMMA"]
        maps = r.get("tensor_maps")
        if isinstance(maps, list):
            boxes = ", ".join("x".join(map(str, m["box"])) + f" ({m['swizzle']})" for m in maps)
        else:
            boxes = "-" if not maps else "?"
        stages = ",".join(map(str, r["stage_ring"])) or "-"
        mma = "; ".join(x.replace("wgmma.mma_async.sync.aligned.", "wgmma.") for x in r["mma"])
        lines.append(
            f"| {r['kernel']} | {r['arch']} | {r['threads']} | {r.get('regs')} | {r.get('smem')} "
            f"| {stages} | {s['UTMALDG']} | {s['SYNCS']} | {gm} | {utc} | {s['UTCBAR']} "
            f"| {s['USETMAXREG']} | {' '.join(r['setmaxnreg']) or '-'} | {mma} | {boxes} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", nargs="*", default=["sm_90", "sm_100"])
    ap.add_argument("--kernels", nargs="*")
    ap.add_argument("--json")
    ap.add_argument("--keep", help="keep the captured PTX/host objects/cubins here")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        keep = Path(args.keep) if args.keep else tmp / "cap"
        tileiras = wrapper(tmp)
        rows = []
        for name, bc in kernel_files(args.kernels, tmp).items():
            for arch in args.arch:
                row = study(name, bc, arch, tileiras, keep)
                rows.append(row)
                print(json.dumps(row), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
        if args.markdown:
            print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
