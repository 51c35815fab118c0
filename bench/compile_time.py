"""Compile time: NVIDIA tileiras vs tilegen, bytecode -> cubin, every corpus kernel.

    python bench/compile_time.py [--gpu-name sm_90] [--repeat N] [--v13-1] [--json OUT]
                                 [--only K ...] [--no-compileall]

Per kernel: wall time of ``tileiras`` (subprocess), ``tilegen-tileiras`` (subprocess: the same
command line, so interpreter start-up and imports count), and ``tilegen.compile`` in this process
(cache off; the first call pays the imports, so every kernel is compiled once before timing).
Prints a table, the median tilegen/tileiras ratios over the kernels tilegen compiles, where
tilegen's time goes (per stage, from ``CompileResult.timings``) and its start-up costs. Kernels
tilegen cannot compile yet are listed with their first diagnostic.

Before timing, stale or missing ``__pycache__`` entries of tilegen's packages are compiled (what
``pip install`` does for a wheel): this workspace sets ``PYTHONDONTWRITEBYTECODE=1``, so a module
edited since its .pyc was written is otherwise recompiled from source by every CLI process
(~100+ ms for a few dozen modules). ``--no-compileall`` times the tree as found.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tilegen.runtime.paths import corpus_out  # noqa: E402  (../shared or $TILEGEN_SHARED)

CORPUS = Path(os.environ.get("TILEGEN_CORPUS") or corpus_out())


def find_tileiras() -> str | None:
    for base in {sys.prefix, sys.exec_prefix}:
        for cand in Path(base).glob("lib/python3*/site-packages/nvidia/cu13/bin/tileiras"):
            return str(cand)
    return shutil.which("tileiras")


def shim_command() -> list[str]:
    script = Path(sys.executable).parent / "tilegen-tileiras"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from tilegen.tools.tileiras import main; "
            "sys.exit(main())"]  # fmt: skip


def wall(cmd: list[str], repeat: int, **kw) -> tuple[float, int, str]:
    """(median seconds, exit code of the last run, its stderr)."""
    times, rc, err = [], 0, ""
    for _ in range(repeat):
        start = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, **kw)
        times.append(time.perf_counter() - start)
        rc, err = p.returncode, p.stderr
    return statistics.median(times), rc, err


def package_dirs() -> list[str]:
    """Source folders of tilegen's packages (the editable install maps three of them)."""
    import importlib.util

    dirs = []
    for pkg in ("tilegen", "tilegen.runtime", "tilegen.generated"):
        spec = importlib.util.find_spec(pkg)
        for loc in (spec and spec.submodule_search_locations) or ():
            if loc not in dirs:
                dirs.append(loc)
    return dirs


def stale_bytecode(dirs: list[str]) -> list[str]:
    """Modules whose ``__pycache__`` entry is missing or older than the source: with
    ``PYTHONDONTWRITEBYTECODE=1`` (set in this workspace) Python recompiles these from source in
    *every* process and never writes the result back, which is start-up cost a wheel install
    (bytecode compiled by pip) does not have."""
    import importlib.util

    stale = []
    for d in dirs:
        for src in Path(d).rglob("*.py"):
            pyc = Path(importlib.util.cache_from_source(str(src)))
            try:
                head = pyc.read_bytes()[:16]
                st = src.stat()
                ok = (
                    int.from_bytes(head[4:8], "little") & 1 == 0
                    and int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
                    and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF
                )
            except OSError:
                ok = False
            if not ok:
                stale.append(str(src))
    return stale


def compile_bytecode(dirs: list[str]) -> int:
    """Bring ``__pycache__`` up to date (what ``pip install`` does for a wheel); the number of
    modules that were stale."""
    import compileall

    stale = stale_bytecode(dirs)
    for d in dirs:
        compileall.compile_dir(d, quiet=2)
    return len(stale)


def startup(repeat: int) -> dict[str, float]:
    """Interpreter start and import costs, each a fresh subprocess (median of ``repeat``)."""
    py = [sys.executable, "-c"]
    rows = {
        "python -c pass": py + ["pass"],
        "import tilegen": py + ["import tilegen"],
        "import tilegen.api": py + ["import tilegen.api"],
        "import tilegen.tools.tileiras": py + ["import tilegen.tools.tileiras"],
        "import the whole pipeline": py
        + [
            "import tilegen.commands.compile, tilegen.runtime.codegen, "
            "tilegen.runtime.codegen.driver, tilegen.runtime.passes.pipeline, "
            "tilegen.runtime.bytecode, tilegen.runtime.verify"
        ],
        "import numpy (not on the compile path)": py + ["import numpy"],
        "tilegen-tileiras --version": shim_command() + ["--version"],
    }
    out = {name: wall(cmd, repeat)[0] for name, cmd in rows.items()}
    with tempfile.TemporaryDirectory() as empty:  # no usable bytecode: every module from source
        env = dict(os.environ, PYTHONPYCACHEPREFIX=empty, PYTHONDONTWRITEBYTECODE="1")
        out["tilegen-tileiras --version, no .pyc at all"] = wall(
            shim_command() + ["--version"], repeat, env=env
        )[0]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu-name", default="sm_90")
    p.add_argument("--repeat", type=int, default=1, help="runs per measurement (median)")
    p.add_argument("--v13-1", action="store_true", help="also the .v13_1 duplicates")
    p.add_argument("--only", nargs="*", help="kernel names")
    p.add_argument("--json", help="write the measurements here")
    p.add_argument(
        "--no-compileall",
        action="store_true",
        help="time the CLI with __pycache__ as found (stale modules recompiled in every process)",
    )
    args = p.parse_args(argv)

    dirs = package_dirs()
    if args.no_compileall:
        n = len(stale_bytecode(dirs))
        print(f"# bytecode: {n} module(s) with missing/stale .pyc, left so (--no-compileall)")
    else:
        n = compile_bytecode(dirs)
        print(f"# bytecode: compiled {n} module(s) with missing/stale .pyc first (as pip would)")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("#   PYTHONDONTWRITEBYTECODE is set: Python never refreshes stale .pyc itself")

    import tilegen

    tileiras = find_tileiras()
    files = sorted(CORPUS.glob("*.tileirbc"))
    if not args.v13_1:
        files = [f for f in files if ".v13_1" not in f.name]
    if args.only:
        files = [f for f in files if f.name.split(".")[0] in args.only]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "k.cubin")
        try:  # pay the in-process imports once, outside the timings
            tilegen.compile(files[0].read_bytes(), args.gpu_name, cache=False)
        except tilegen.CompileError:
            pass
        for f in files:
            name = f.name[: -len(".tileirbc")]
            row = {"kernel": name}
            if tileiras:
                row["tileiras"], row["tileiras_rc"], _ = wall(
                    [tileiras, f"--gpu-name={args.gpu_name}", str(f), "-o", out], args.repeat
                )
            cmd = shim_command() + [f"--gpu-name={args.gpu_name}", str(f), "-o", out]
            row["cli"], row["cli_rc"], err = wall(cmd, args.repeat)
            times = []
            data = f.read_bytes()
            for _ in range(args.repeat):
                start = time.perf_counter()
                try:
                    result = tilegen.compile(data, args.gpu_name, cache=False, name=str(f))
                    row["ok"], row["timings"] = True, result.timings
                except tilegen.CompileError as e:
                    row["ok"], row["error"], row["exit_code"] = (
                        False,
                        str(e).splitlines()[0],
                        e.exit_code,
                    )
                times.append(time.perf_counter() - start)
            row["api"] = statistics.median(times)
            rows.append(row)
    report(rows, startup(max(3, args.repeat)), tileiras, args)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def report(rows, starts, tileiras, args) -> None:
    ms = lambda s: f"{1000 * s:8.1f}"  # noqa: E731
    print(f"# bytecode -> cubin, {args.gpu_name}, median of {args.repeat} run(s), wall ms\n")
    print(
        f"{'kernel':<22} {'tileiras':>8} {'tg-cli':>8} {'tg-api':>8} {'cli/ti':>7} {'api/ti':>7}  status"
    )
    ratios_cli, ratios_api = [], []
    for r in rows:
        ti = r.get("tileiras")
        ratio_cli = r["cli"] / ti if ti and r["ok"] else None
        ratio_api = r["api"] / ti if ti and r["ok"] else None
        if ratio_cli is not None:
            ratios_cli.append(ratio_cli)
            ratios_api.append(ratio_api)
        status = "ok" if r["ok"] else f"not yet (exit {r['exit_code']}): {r['error'][:70]}"
        if ti and r.get("tileiras_rc"):
            status += f" [tileiras exit {r['tileiras_rc']}]"
        print(
            f"{r['kernel']:<22} {ms(ti) if ti else '       -'} {ms(r['cli'])} {ms(r['api'])} "
            f"{ratio_cli and f'{ratio_cli:7.2f}' or '      -'} "
            f"{ratio_api and f'{ratio_api:7.2f}' or '      -'}  {status}"
        )
    compiled = [r for r in rows if r["ok"]]
    print(f"\ntilegen compiles {len(compiled)}/{len(rows)} kernels")
    if ratios_cli:
        print(f"median tilegen-tileiras / tileiras: {statistics.median(ratios_cli):.2f}x")
        print(f"median tilegen.compile  / tileiras: {statistics.median(ratios_api):.2f}x")
    elif not tileiras:
        print("NVIDIA tileiras not installed: no ratios")

    if compiled:
        stages: dict[str, list[float]] = {}
        for r in compiled:
            for k, v in r["timings"].items():
                stages.setdefault(k, []).append(v)
        total = sum(stages["total"])
        print("\n# where tilegen.compile's time goes (compiled kernels, summed)")
        for k, vs in stages.items():
            if k != "total":
                print(f"  {k:<45} {ms(sum(vs))} ms  {100 * sum(vs) / total:5.1f}%")
        other = total - sum(sum(vs) for k, vs in stages.items() if k != "total")
        print(f"  {'(api overhead)':<45} {ms(other)} ms  {100 * other / total:5.1f}%")
        print(f"  {'total':<45} {ms(total)} ms")
        cli = statistics.median(r["cli"] for r in compiled)
        api = statistics.median(r["api"] for r in compiled)
        print(f"\n  median tilegen-tileiras process {ms(cli)} ms vs in-process {ms(api)} ms: "
              f"start-up + imports ~ {ms(cli - api)} ms")  # fmt: skip
    print("\n# start-up (fresh process each, median)")
    for k, v in starts.items():
        print(f"  {k:<45} {ms(v)} ms")


if __name__ == "__main__":
    sys.exit(main())
