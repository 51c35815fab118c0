"""``make gpu-check``: build, on a CPU machine, everything a GPU machine needs to check tilegen.

``python bench/gpu_check.py [--out DIR] [--arch sm_90 ...] [--kernel NAME ...] [--no-cutile]
[--offline]``

Writes DIR (default ``build/gpu-check``, ignored by git), the payload ``bench/gpu_runner.py``
runs on the GPU machine:

* ``cubins/<k>.<arch>.tilegen.cubin`` and ``cubins/<k>.<arch>.tileiras.cubin`` for every valid
  corpus kernel and each ``--arch`` (default sm_90 and sm_100: the runner picks the device's);
  ``data/<k>.npz``, the corpus inputs and expected outputs;
* ``cutile/``: ``cutile_kernels.py`` (tests/cutile_kernels.py) and, for every case of its
  ``launch_cases()``, both compilers' cubins for the signature cuTile's launcher derives from
  those arguments (``tilegen.cutile.signature_for``), swapped in at ``kernel._compile`` on the
  GPU (neither tileiras nor a 13.5 ptxas fits the payload; see bench/gpu_runner.py);
* ``wheels/``: the ``cuda-tile`` wheel for the GPU machine's Python 3.12 (``run.sh`` installs
  it into the payload's ``site/``; ``--offline`` uses build/wheels only);
* ``runner.py`` (bench/gpu_runner.py), ``run.sh``, ``manifest.json``.

It prints the payload's size (with the repository's tracked files, which travel too: the
device tool's limit is 64 MiB for both), the kernel count and the exact device-tool command.
docs/gpu_check.md describes the report the run writes.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "bench"
sys.path.insert(0, str(HERE))

from gpu_runner import _signature_key  # noqa: E402

ARCHS = ("sm_90", "sm_100")
DEFAULT_OUT = ROOT / "build" / "gpu-check"
WHEEL_CACHE = ROOT / "build" / "wheels"
CUTILE_WHEEL = "cuda-tile==1.7.0"
LIMIT = 64 << 20  # the device tool's limit on what travels (working tree + carried paths)
#: the large cases (bench/gpu_runner.py large_case): streaming kernels at bandwidth-measuring
#: sizes and one matmul; tile sizes are read from the corpus manifest's constants
LARGE = (
    {"name": "vec_add 2^26", "kernel": "vec_add", "kind": "vec_add", "n": 1 << 26},
    {"name": "softmax 2^20 x 100", "kernel": "softmax", "kind": "softmax", "rows": 1 << 20},
    {"name": "layernorm 2^19 x 256", "kernel": "layernorm", "kind": "layernorm", "rows": 1 << 19},
    {"name": "matmul_f16 4096^3", "kernel": "matmul_f16", "kind": "matmul", "size": 4096},
)


def shared_dir() -> Path:
    env = os.environ.get("TILEGEN_SHARED")
    return Path(env) if env else ROOT.parent / "shared"


def nvidia_tool(name: str) -> str | None:
    for cand in Path(sys.prefix).glob(f"lib/python3*/site-packages/nvidia/cu13/bin/{name}"):
        return str(cand)
    return shutil.which(name)


def _constants(entry: dict) -> dict:
    return {p["name"]: p["value"] for p in entry["params"] if p["kind"] == "constant"}


def large_cases(corpus_manifest: dict) -> list[dict]:
    entries = {k["name"]: k for k in corpus_manifest["kernels"]}
    out = []
    for case in LARGE:
        c = dict(case)
        k = _constants(entries[case["kernel"]])
        if c["kind"] == "vec_add":
            c["tile"] = k["TILE"]
        elif c["kind"] == "softmax":
            c.update(tm=k["TM"], cols=100)  # the corpus's 100 columns in a 128-wide tile
        elif c["kind"] == "layernorm":
            c.update(tm=k["TM"], cols=k["TN"], eps=k["EPS"])  # N is static (shape_constant)
        elif c["kind"] == "matmul":
            c.update(tm=k["TM"], tn=k["TN"])
        out.append(c)
    return out


def _short(message: str) -> str:
    lines = [x for x in str(message).splitlines() if x.strip()]
    return " ".join(lines[-2:])[:400] if lines else "failed"


def build_corpus(out: Path, corpus: Path, archs, only) -> dict:
    import tilegen

    from concurrent.futures import ThreadPoolExecutor

    tileiras = nvidia_tool("tileiras")
    manifest = json.loads((corpus / "manifest.json").read_text())
    kernels = {}
    # tileiras runs in the background (a subprocess per cubin, os.cpu_count() at a time) while
    # tilegen compiles in this process: the same commands, results collected in order
    pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 2)
    jobs = {}
    for entry in manifest["kernels"]:
        name = entry["name"]
        if entry.get("expect_tileiras_fail") or (only and name not in only) or tileiras is None:
            continue
        src = corpus / "out" / f"{name}.tileirbc"
        for arch in archs:
            dst = out / f"cubins/{name}.{arch}.tileiras.cubin"
            cmd = [tileiras, f"--gpu-name={arch}", "-O3", str(src), "-o", str(dst)]
            jobs[name, arch] = pool.submit(subprocess.run, cmd, capture_output=True, text=True)
    for entry in manifest["kernels"]:
        name = entry["name"]
        if entry.get("expect_tileiras_fail") or (only and name not in only):
            continue
        src = corpus / "out" / f"{name}.tileirbc"
        shutil.copy(corpus / "out" / f"{name}.npz", out / "data" / f"{name}.npz")
        k = {
            "npz": f"data/{name}.npz",
            "tolerance": entry.get("tolerance_rtol_atol", [1e-5, 1e-6]),
            "cubins": {},
            "errors": {},
        }
        for arch in archs:
            cubins, errors = {}, {}
            rel = f"cubins/{name}.{arch}.tilegen.cubin"
            try:
                result = tilegen.compile(src.read_bytes(), gpu_name=arch, name=str(src))
                (out / rel).write_bytes(result.cubin)
                cubins["tilegen"] = rel
            except tilegen.CompileError as e:
                errors["tilegen"] = _short(e)
            rel = f"cubins/{name}.{arch}.tileiras.cubin"
            if tileiras is None:
                errors["tileiras"] = "tileiras not installed on the build machine"
            else:
                p = jobs[name, arch].result()
                if p.returncode == 0:
                    cubins["tileiras"] = rel
                else:
                    errors["tileiras"] = _short(p.stderr) + f" (exit {p.returncode})"
            k["cubins"][arch] = cubins
            if errors:
                k["errors"][arch] = errors
        kernels[name] = k
        built = ", ".join(f"{a}: {'+'.join(sorted(k['cubins'][a])) or 'none'}" for a in archs)
        print(f"  {name}: {built}", flush=True)
    pool.shutdown()
    return {"kernels": kernels, "large": large_cases(manifest)}


def gcd_variant(sig, args):
    """``sig`` with the other plausible launcher rule for divisibility: the largest power of
    two up to 16 dividing each shape and each stride in bytes (instead of 16-or-nothing).
    Recorded too, so that either rule finds its cubins on the GPU."""
    import dataclasses
    import math

    import numpy as np
    from cuda.tile.compilation import ArrayConstraint, KernelSignature

    arrays = iter(a for a in args if isinstance(a, np.ndarray))
    params = []
    for p in sig.parameters:
        if isinstance(p, ArrayConstraint):
            a = next(arrays)
            shape = a.shape
            strides = [int(np.prod(shape[i + 1 :], dtype=np.int64)) for i in range(len(shape))]
            size = a.dtype.itemsize
            p = dataclasses.replace(
                p,
                shape_divisible_by=tuple(math.gcd(int(n), 16) or 16 for n in shape),
                stride_divisible_by=tuple(max(1, math.gcd(s * size, 16) // size) for s in strides),
            )
        params.append(p)
    return KernelSignature(params, sig.calling_convention)


def record(out: Path, kernel, sig, stem: str, archs) -> tuple[dict, dict]:
    """Both compilers' cubins of ``kernel`` for ``sig``, per arch: ({arch: {compiler: path}},
    {arch: {compiler: error}})."""
    from cuda.tile.compilation import export_kernel

    cubins_by_arch, errors_by_arch = {}, {}
    for arch in archs:
        cubins, errors = {}, {}
        rel = f"cutile/{stem}.{arch}.tileiras.cubin"
        buf = io.BytesIO()
        try:
            export_kernel(kernel, [sig], buf, gpu_code=arch, output_format="cubin")
            (out / rel).write_bytes(buf.getvalue())
            cubins["tileiras"] = rel
        except Exception as e:  # noqa: BLE001 - recorded in the manifest
            errors["tileiras"] = _short(e)
        rel = f"cutile/{stem}.{arch}.tilegen.cubin"
        try:
            (out / rel).write_bytes(tilegen_cubin(kernel, sig, arch))
            cubins["tilegen"] = rel
        except Exception as e:  # noqa: BLE001 - recorded in the manifest
            errors["tilegen"] = _short(e)
        cubins_by_arch[arch] = cubins
        if errors:
            errors_by_arch[arch] = errors
    return cubins_by_arch, errors_by_arch


def build_cutile(out: Path, archs) -> dict:
    """Record both compilers' cubins for every launch case (see the module doc)."""
    try:
        import numpy as np

        import cuda.tile  # noqa: F401
    except ImportError as e:
        return {"reason": f"cuda-tile is not installed on the build machine: {e}"}
    from tilegen.cutile_launch import signature_for

    shutil.copy(ROOT / "tests" / "cutile_kernels.py", out / "cutile" / "cutile_kernels.py")
    sys.path.insert(0, str(ROOT / "tests"))
    from cutile_kernels import kernels, launch_cases

    ks = kernels()
    cases = {}
    for lc in launch_cases():
        kernel = ks[lc.kernel].kernel
        _grid, args = lc.make(np.random.default_rng(0))
        sig = signature_for(kernel, args)
        variants = [("launcher", sig)]
        alt = gcd_variant(sig, args)
        if _signature_key(alt) != _signature_key(sig):
            variants.append(("gcd", alt))
        recorded = []
        for label, v in variants:
            v = v.with_mangled_symbol(lc.kernel)
            entry = {"variant": label, "key": _signature_key(v), "symbol": v.symbol}
            entry["cubins"], entry["errors"] = record(out, kernel, v, f"{lc.name}.{label}", archs)
            recorded.append(entry)
        cases[lc.name] = {"kernel": lc.kernel, **recorded[0], "alternatives": recorded[1:]}
        failed = sorted({f"{c} {a}" for a, e in recorded[0]["errors"].items() for c in e})
        print(f"  cuTile {lc.name}: " + (f"FAILED {', '.join(failed)}" if failed else "ok"))
    return {"kernels_py": "cutile/cutile_kernels.py", "cases": cases}


def tilegen_cubin(kernel, sig, arch: str, opts: dict | None = None) -> bytes:
    """tilegen's cubin of cuTile ``kernel`` for ``sig`` (its bytecode as cuTile exports it),
    with the CompileOptions fields ``opts`` when given."""
    from cuda.tile.compilation import export_kernel

    import tilegen
    from tilegen.cutile_launch import _bytecode_version
    from tilegen.runtime.options import CompileOptions

    buf = io.BytesIO()
    export_kernel(
        kernel,
        [sig],
        buf,
        gpu_code=arch,
        output_format="tileir_bytecode",
        bytecode_version=_bytecode_version(),
    )
    if opts is None:
        return tilegen.compile(buf.getvalue(), gpu_name=arch).cubin
    opts = dict(opts)
    patch = opts.pop("ptx_patch", None)  # (gpu_perf_cases.PTX_PATCHES: an experiment)
    r = tilegen.compile(buf.getvalue(), options=CompileOptions(target=arch, **opts))
    if patch is None:
        return r.cubin
    import gpu_perf_cases as perf
    from tilegen.runtime.ptxas import assemble

    # (the same ptxas call tilegen.compile makes: unpatched, the same cubin bytes)
    return assemble(perf.PTX_PATCHES[patch](r.ptx), int(arch.split("_")[1].rstrip("a")))[0]


def build_perf(out: Path, archs) -> dict:
    """Record both compilers' cubins for every throughput case of bench/gpu_perf_cases.py (the
    signature ``ct.launch`` derives from arguments of the case's dtypes and shapes)."""
    try:
        import cuda.tile  # noqa: F401
        import ml_dtypes  # noqa: F401
    except ImportError as e:
        return {"reason": f"cuda-tile or ml_dtypes is not installed on the build machine: {e}"}
    from tilegen.cutile_launch import signature_for

    for f in (ROOT / "tests" / "cutile_kernels_async.py", HERE / "gpu_perf_cases.py"):
        shutil.copy(f, out / "cutile" / f.name)
    if not (out / "cutile" / "cutile_kernels.py").exists():
        shutil.copy(ROOT / "tests" / "cutile_kernels.py", out / "cutile" / "cutile_kernels.py")
    sys.path.insert(0, str(ROOT / "tests"))
    import gpu_perf_cases as perf

    ks = perf.kernels()
    cases, stems = {}, {}
    for i, case in enumerate(perf.cases()):
        kernel = ks[case.kernel]
        sig = signature_for(kernel, perf.numpy_args(case)).with_mangled_symbol(case.kernel)
        key = _signature_key(sig)
        # one pair of cubins per kernel and signature (4096 and 8192 share theirs); the key
        # alone is the arguments' types, alike for a kernel and its num_ctas=2 form
        if (case.kernel, key) not in stems:
            stems[case.kernel, key] = record(out, kernel, sig, f"perf{i}_{case.kernel}", archs)
        cubins, errors = stems[case.kernel, key]
        if case.name in perf.VARIANTS:
            cubins = {a: dict(c) for a, c in cubins.items()}
            for arch in archs:
                for label, opts in perf.VARIANTS[case.name].items():
                    stem = "".join(ch if ch.isalnum() else "_" for ch in label.replace("=", ""))
                    rel = f"cutile/perf{i}_{stem}.{arch}.tilegen.cubin"
                    opts = dict(opts)  # "kernel": the case's kernel with other hints
                    other = ks[opts.pop("kernel")] if "kernel" in opts else kernel
                    try:
                        (out / rel).write_bytes(tilegen_cubin(other, sig, arch, opts))
                        cubins[arch][f"tilegen {label}"] = rel
                    except Exception as e:  # noqa: BLE001 - a variant that does not build
                        print(f"  perf {case.name} {label}: {_short(e)}")
        cases[case.name] = {
            "kernel": case.kernel,
            "variant": "launcher",
            "key": key,
            "symbol": sig.symbol,
            "cubins": cubins,
            "errors": errors,
        }
        failed = sorted({f"{c} {a}" for a, e in errors.items() for c in e})
        print(f"  perf {case.name}: " + (f"FAILED {', '.join(failed)}" if failed else "ok"))
    return {"module": "cutile/gpu_perf_cases.py", "cases": cases}


def fetch_wheel(out: Path, offline: bool) -> str | None:
    """The cuda-tile wheel for CPython 3.12 on x86-64 Linux, from build/wheels (downloaded
    there first unless ``offline``); None when there is none."""
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(WHEEL_CACHE.glob("cuda_tile-*-cp312-*.whl"))
    if not found and not offline:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
            + ["--python-version", "3.12", "--implementation", "cp"]
            + [
                f"--platform={p}"
                for p in (
                    "manylinux_2_28_x86_64",
                    "manylinux_2_17_x86_64",
                    "manylinux2014_x86_64",
                )
            ]
            + ["-d", str(WHEEL_CACHE), CUTILE_WHEEL],
            capture_output=True,
        )
        found = sorted(WHEEL_CACHE.glob("cuda_tile-*-cp312-*.whl"))
    if not found:
        return None
    shutil.copy(found[-1], out / "wheels" / found[-1].name)
    return f"wheels/{found[-1].name}"


RUN_SH = """#!/bin/bash
# The tilegen GPU check (bench/gpu_check.py built this). On the GPU machine, from the repository
# root: bash build/gpu-check/run.sh  -- writes gpu_results.md and results.json to $OUT.
P=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$P/out}
mkdir -p "$OUT"
if ls "$P"/wheels/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
    --target "$P/site" "$P"/wheels/*.whl \\
    && export PYTHONPATH="$P/site"${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
python3 "$P/runner.py" "$P" --out "$OUT" "$@"
"""


def tracked_size() -> int:
    """Bytes of the repository's tracked files (they travel with the payload)."""
    p = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    total = 0
    for name in p.stdout.decode().split("\0"):
        if name and (ROOT / name).is_file():
            total += (ROOT / name).stat().st_size
    return total


def payload_size(out: Path) -> int:
    return sum(f.stat().st_size for f in out.rglob("*") if f.is_file())


def run_command(out: Path) -> str:
    rel = out.resolve().relative_to(ROOT) if out.resolve().is_relative_to(ROOT) else out
    return (
        f'run(command="bash {rel}/run.sh", carry=["{rel}"], timeout_s=600)'
        "   # then read $OUT's gpu_results.md (files_at)"
    )


def build(out: Path, archs, only, cutile: bool, offline: bool) -> dict:
    corpus = shared_dir() / "corpus" / "cutile"
    if not (corpus / "manifest.json").exists():
        raise SystemExit(f"gpu_check: error: no cuTile corpus at {corpus} (set TILEGEN_SHARED)")
    if out.exists():
        shutil.rmtree(out)
    for sub in ("cubins", "data", "cutile", "wheels"):
        (out / sub).mkdir(parents=True)
    t0 = time.perf_counter()
    print(f"building {out} for {', '.join(archs)}", flush=True)
    manifest = {
        "format": 1,
        "built": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=7"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        or "unknown",
        "archs": list(archs),
        "matmul_peak_size": 8192,
    }
    tileiras = nvidia_tool("tileiras")
    version = "not installed"
    if tileiras:
        text = subprocess.run([tileiras, "--version"], capture_output=True, text=True).stdout
        version = next((x for x in text.splitlines() if "release" in x), text.strip())
    manifest["tileiras_version"] = version
    manifest.update(build_corpus(out, corpus, archs, only))
    manifest["cutile"] = build_cutile(out, archs) if cutile else {"reason": "--no-cutile"}
    manifest["perf"] = build_perf(out, archs) if cutile else {"reason": "--no-cutile"}
    wheel = fetch_wheel(out, offline) if cutile else None
    manifest["cutile"]["wheel"] = wheel
    if cutile and wheel is None:
        manifest["cutile"]["reason"] = "no cuda-tile wheel for Python 3.12 in the payload"
    shutil.copy(HERE / "gpu_runner.py", out / "runner.py")
    (out / "run.sh").write_text(RUN_SH)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    manifest["build_seconds"] = time.perf_counter() - t0
    return manifest


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--arch", action="append", help=f"targets (default {', '.join(ARCHS)})")
    p.add_argument("--kernel", action="append", help="only these corpus kernels")
    p.add_argument("--no-cutile", action="store_true", help="leave out the ct.launch part")
    p.add_argument("--offline", action="store_true", help="no pip download (build/wheels only)")
    args = p.parse_args(argv)
    manifest = build(
        args.out, tuple(args.arch or ARCHS), args.kernel, not args.no_cutile, args.offline
    )
    size, tree = payload_size(args.out), tracked_size()
    cubins = len(list(args.out.glob("cubins/*.cubin")))
    cut = manifest["cutile"].get("cases", {})
    print(
        f"payload {args.out}: {size / 2**20:.1f} MiB (+ {tree / 2**20:.1f} MiB of tracked files "
        f"= {(size + tree) / 2**20:.1f} MiB of the 64 MiB the device tool carries); "
        f"{len(manifest['kernels'])} corpus kernels, {cubins} corpus cubins, "
        f"{len(cut)} cuTile launch cases; built in {manifest['build_seconds']:.0f} s"
    )
    if size + tree > LIMIT:
        print("gpu_check: error: the payload is over the device tool's limit", file=sys.stderr)
        return 1
    print("on a GPU machine, the device tool call:")
    print("  " + run_command(args.out))
    print(f"dry run here: python {args.out}/runner.py {args.out} --dry-run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
