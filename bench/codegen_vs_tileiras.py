"""tilegen vs tileiras on the cuTile corpus: SASS size, registers and compile time per kernel/arch.

``python bench/codegen_vs_tileiras.py [KERNEL ...] [--arch sm_90 ...] [--repeat N] [--all]
[--json OUT] [--keep DIR]``

For each kernel and target both compilers turn the same ``.tileirbc`` into a cubin, each as a
process (``tilegen compile --emit=cubin`` / ``tileiras``), timed wall-clock (median of
``--repeat``). Both cubins are measured the same way: SASS instructions counted in
``cuobjdump -sass`` output (NVIDIA's disassembler from the ``nvidia-cuda-cuobjdump`` wheel; the
16-byte instruction words of ``.text.<kernel>`` when cuobjdump is missing), registers from
``EIATTR_REGCOUNT`` and threads from ``EIATTR_REQNTID`` in ``.nv.info`` (bench/cubin_info.py).
Prints one row per kernel/arch and the medians of the tilegen/tileiras ratios.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from codegen_status import ALL_KERNELS, ARCHS, OUT, TARGET_KERNELS  # noqa: E402
from cubin_info import count_sass, only_kernel  # noqa: E402


def nvidia_tool(name: str) -> str | None:
    for cand in Path(sys.prefix).glob(f"lib/python3*/site-packages/nvidia/cu13/bin/{name}"):
        return str(cand)
    return shutil.which(name)


def tilegen_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "tilegen"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "tilegen.cli"]


def timed(cmd: list[str], repeat: int) -> tuple[int, float, str]:
    """(return code, median wall seconds, stderr of the last run)."""
    times, p = [], None
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if p.returncode != 0:
            break
    return p.returncode, statistics.median(times), p.stderr


def measure_cubin(path: Path, cuobjdump: str | None) -> dict:
    info = only_kernel(path.read_bytes())
    out = {"regs": info.registers, "threads": info.threads, "words": info.instruction_words}
    if cuobjdump:
        p = subprocess.run([cuobjdump, "-sass", str(path)], capture_output=True, text=True)
        if p.returncode == 0:
            out["sass"], out["sass_non_nop"] = count_sass(p.stdout)
            out["sass_method"] = "cuobjdump"
    if "sass" not in out:
        out["sass"], out["sass_non_nop"] = info.instruction_words, None
        out["sass_method"] = "elf-words"
    return out


def compare(kernel: str, arch: str, repeat: int, tmp: Path, tools: dict) -> dict:
    src = OUT / f"{kernel}.tileirbc"
    row: dict = {"kernel": kernel, "arch": arch}
    for who, cmd in (
        ("tilegen", tilegen_cmd() + ["compile", str(src), f"--gpu-name={arch}", "--emit=cubin"]),
        ("tileiras", [tools["tileiras"], f"--gpu-name={arch}"]),
    ):
        cubin = tmp / f"{kernel}.{arch}.{who}.cubin"
        full = cmd + ["-o", str(cubin)] + ([str(src)] if who == "tileiras" else [])
        rc, seconds, err = timed(full, repeat)
        if rc != 0 or not cubin.exists():
            lines = err.strip().splitlines() or ["failed"]
            first = lines[-1] if lines[0].startswith("Traceback") else lines[0]
            row[who] = {"ok": False, "error": first[:160]}
            continue
        row[who] = {"ok": True, "time_s": seconds, **measure_cubin(cubin, tools["cuobjdump"])}
    return row


def _ratio(row: dict, key: str):
    a, b = row.get("tilegen", {}), row.get("tileiras", {})
    if a.get("ok") and b.get("ok") and a.get(key) and b.get(key):
        return a[key] / b[key]
    return None


def _fmt(d: dict, key: str, spec: str = "") -> str:
    v = d.get(key) if d.get("ok") else None
    return "-" if v is None else format(v, spec)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("kernels", nargs="*", help=f"default: the {len(TARGET_KERNELS)} target kernels")
    p.add_argument("--all", action="store_true", help="every corpus kernel (mma ones too)")
    p.add_argument("--arch", action="append", choices=ARCHS, help="default: all four")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per compile (median)")
    p.add_argument("--json", metavar="OUT", help="also write the rows as JSON")
    p.add_argument(
        "--keep",
        metavar="DIR",
        type=Path,
        help="keep both cubins and copy each kernel's npz into DIR (input of bench/gpu_runner.py)",
    )
    args = p.parse_args(argv)
    tools = {"tileiras": nvidia_tool("tileiras"), "cuobjdump": nvidia_tool("cuobjdump")}
    if tools["tileiras"] is None:
        print("error: tileiras not found (pip install nvidia-cuda-tileiras)", file=sys.stderr)
        return 1
    if tools["cuobjdump"] is None:
        print(
            "note: cuobjdump not found (pip install nvidia-cuda-cuobjdump): counting 16-byte "
            "instruction words in .text.<kernel> instead",
            file=sys.stderr,
        )
    kernels = args.kernels or (ALL_KERNELS if args.all else TARGET_KERNELS)
    archs = args.arch or list(ARCHS)
    head = (
        f"{'kernel':18s} {'arch':6s} {'sass tg/ti':>12s} {'ratio':>6s} {'regs tg/ti':>10s} "
        f"{'thr tg/ti':>9s} {'time tg/ti (s)':>15s} {'ratio':>6s}"
    )
    print(head)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for k in kernels:
            for a in archs:
                row = compare(k, a, args.repeat, Path(d), tools)
                rows.append(row)
                if args.keep:
                    args.keep.mkdir(parents=True, exist_ok=True)
                    for cubin in Path(d).glob(f"{k}.{a}.*.cubin"):
                        shutil.copy(cubin, args.keep / cubin.name)
                    if (OUT / f"{k}.npz").exists():
                        shutil.copy(OUT / f"{k}.npz", args.keep / f"{k}.npz")
                tg, ti = row["tilegen"], row["tileiras"]
                sr, tr = _ratio(row, "sass"), _ratio(row, "time_s")
                note = "" if tg.get("ok") else f"  tilegen: {tg.get('error')}"
                note += "" if ti.get("ok") else f"  tileiras: {ti.get('error')}"
                print(
                    f"{k:18s} {a:6s} {_fmt(tg, 'sass'):>5s}/{_fmt(ti, 'sass'):<6s} "
                    f"{'-' if sr is None else f'{sr:.2f}':>6s} "
                    f"{_fmt(tg, 'regs'):>4s}/{_fmt(ti, 'regs'):<5s} "
                    f"{_fmt(tg, 'threads'):>4s}/{_fmt(ti, 'threads'):<4s} "
                    f"{_fmt(tg, 'time_s', '.3f'):>7s}/{_fmt(ti, 'time_s', '.3f'):<7s} "
                    f"{'-' if tr is None else f'{tr:.2f}':>6s}{note}"
                )
                sys.stdout.flush()
    print()
    for a in archs + ["all"]:
        sel = [r for r in rows if a == "all" or r["arch"] == a]
        med = {}
        for key in ("sass", "regs", "time_s"):
            vals = [v for v in (_ratio(r, key) for r in sel) if v is not None]
            med[key] = f"{statistics.median(vals):.2f} (n={len(vals)})" if vals else "-"
        print(
            f"median tilegen/tileiras [{a}]: SASS instructions {med['sass']}, "
            f"registers {med['regs']}, compile time {med['time_s']}"
        )
    method = {r[w].get("sass_method") for r in rows for w in ("tilegen", "tileiras")}
    print(f"SASS counted by: {', '.join(sorted(m for m in method if m))}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
