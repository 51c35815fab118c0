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
        "python -S -c pass (no site / .pth files)": [sys.executable, "-S", "-c", "pass"],
        "import tilegen": py + ["import tilegen"],
        "import tilegen.api": py + ["import tilegen.api"],
        "import tilegen.tools.tileiras": py + ["import tilegen.tools.tileiras"],
        "import the whole pipeline": py
        + [
            "import tilegen.commands.compile, tilegen.runtime.codegen, "
            "tilegen.runtime.codegen.driver, tilegen.runtime.passes.pipeline, "
            "tilegen.runtime.bytecode, tilegen.runtime.verify"
        ],
        "import numpy (the layout exchange needs it)": py + ["import numpy"],
        "tilegen-tileiras --version": shim_command() + ["--version"],
    }
    cold = dict(os.environ, TILEGEN_SERVER="0")
    out = {name: wall(cmd, repeat, env=cold)[0] for name, cmd in rows.items()}
    with tempfile.TemporaryDirectory() as empty:  # no usable bytecode: every module from source
        env = dict(cold, PYTHONPYCACHEPREFIX=empty, PYTHONDONTWRITEBYTECODE="1")
        out["tilegen-tileiras --version, no .pyc at all"] = wall(
            shim_command() + ["--version"], repeat, env=env
        )[0]
    return out


def tilegen_command() -> list[str]:
    script = Path(sys.executable).parent / "tilegen"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from tilegen.cli import main; sys.exit(main())"]


def start_server(env: dict) -> subprocess.Popen:
    """A warm server (tilegen/server.py) on the private socket folder of ``env``, as the first
    ``tilegen-tileiras`` call would start it; returns once it listens."""
    proc = subprocess.Popen([sys.executable, "-m", "tilegen.server"], env=env)
    folder = env["TILEGEN_SERVER_DIR"]
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if any(n.endswith(".sock") for n in os.listdir(folder)):
            return proc
        time.sleep(0.05)
    raise SystemExit(f"compile server did not start (exit {proc.poll()})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu-name", default="sm_90")
    p.add_argument("--repeat", type=int, default=1, help="runs per measurement (median)")
    p.add_argument("--v13-1", action="store_true", help="also the .v13_1 duplicates")
    p.add_argument("--only", nargs="*", help="kernel names")
    p.add_argument("--json", help="write the measurements here")
    p.add_argument("--no-server", action="store_true", help="time cold processes only")
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
    print(f"# load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} CPUs")  # fmt: skip

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
        srv_dir = os.path.join(tmp, "srv")
        os.mkdir(srv_dir, 0o700)
        cold_env = dict(os.environ, TILEGEN_SERVER="0")
        warm_env = dict(os.environ, TILEGEN_SERVER="1", TILEGEN_SERVER_DIR=srv_dir)
        server = None if args.no_server else start_server(warm_env)
        try:
            try:  # pay the in-process imports once, outside the timings
                tilegen.compile(files[0].read_bytes(), args.gpu_name, cache=False)
            except tilegen.CompileError:
                pass
            for f in files:
                rows.append(measure(f, out, args, tileiras, cold_env, warm_env, server))
        finally:
            if server is not None:
                subprocess.run(
                    [sys.executable, "-m", "tilegen.server", "--stop"], env=warm_env, check=False
                )
                try:
                    server.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()
    report(rows, startup(max(3, args.repeat)), tileiras, args)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def measure(f: Path, out: str, args, tileiras, cold_env, warm_env, server) -> dict:
    """One kernel: every command once per round, the commands alternating within a round (the
    machine's load then hits all of them alike); medians over ``args.repeat`` rounds."""
    import tilegen

    name = f.name[: -len(".tileirbc")]
    shim = shim_command() + [f"--gpu-name={args.gpu_name}", str(f), "-o", out]
    cli = tilegen_command() + ["compile", str(f), f"--gpu-name={args.gpu_name}", "-o", out]
    cmds: dict[str, tuple[list[str], dict]] = {}
    if tileiras:
        cmds["tileiras"] = ([tileiras, f"--gpu-name={args.gpu_name}", str(f), "-o", out], None)
    cmds["cli"] = (shim, cold_env)
    cmds["compile"] = (cli, cold_env)
    if server is not None:
        cmds["cli_warm"] = (shim, warm_env)
        cmds["compile_warm"] = (cli, warm_env)
    times: dict[str, list[float]] = {k: [] for k in cmds}
    row: dict = {"kernel": name}
    for _ in range(args.repeat):
        for key, (cmd, env) in cmds.items():
            start = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, env=env)
            times[key].append(time.perf_counter() - start)
            row[f"{key}_rc"] = p.returncode
    for key, ts in times.items():
        row[key] = statistics.median(ts)
        row[f"{key}_all"] = ts
    row["tileiras_rc"] = row.get("tileiras_rc", 0)
    api_times = []
    data = f.read_bytes()
    for _ in range(args.repeat):
        start = time.perf_counter()
        try:
            result = tilegen.compile(data, args.gpu_name, cache=False, name=str(f))
            row["ok"], row["timings"] = True, result.timings
        except tilegen.CompileError as e:
            row["ok"], row["error"], row["exit_code"] = False, str(e).splitlines()[0], e.exit_code
        api_times.append(time.perf_counter() - start)
    row["api"] = statistics.median(api_times)
    return row


def _q(xs: list[float]) -> str:
    """median [p25-p75] of ratios"""
    xs = sorted(xs)
    if not xs:
        return "-"
    lo, hi = xs[len(xs) // 4], xs[(3 * len(xs)) // 4]
    return f"{statistics.median(xs):.2f}x (quartiles {lo:.2f}-{hi:.2f})"


def report(rows, starts, tileiras, args) -> None:
    ms = lambda s: f"{1000 * s:7.0f}" if s is not None else "      -"  # noqa: E731
    print(f"# bytecode -> cubin, {args.gpu_name}, median of {args.repeat} round(s), wall ms")
    print("#   cold: TILEGEN_SERVER=0, a fresh process that imports everything;")
    print("#   warm: the same command served by the compile server (tilegen/server.py)\n")
    cols = ["tileiras", "cli", "cli_warm", "compile", "compile_warm", "api"]
    heads = ["tileiras", "shim", "shim-w", "compile", "compile-w", "api"]
    print(f"{'kernel':<20} " + " ".join(f"{h:>7}" for h in heads) + "   shim/ti  api/ti  status")
    ratios: dict[str, list[float]] = {c: [] for c in cols[1:]}
    spread: list[float] = []
    for r in rows:
        ti = r.get("tileiras")
        ok = r["ok"] and ti
        if ok:
            for c in cols[1:]:
                if r.get(c) is not None:
                    ratios[c].append(r[c] / ti)
            spread += [(max(v) - min(v)) / statistics.median(v) for k, v in r.items()
                       if k.endswith("_all") and len(v) > 1]  # fmt: skip
        status = "ok" if r["ok"] else f"not yet (exit {r['exit_code']}): {r['error'][:50]}"
        if ti and r.get("tileiras_rc"):
            status += f" [tileiras exit {r['tileiras_rc']}]"
        sr = f"{r['cli'] / ti:7.2f}" if ok else "      -"
        ar = f"{r['api'] / ti:7.2f}" if ok else "      -"
        print(
            f"{r['kernel']:<20} " + " ".join(ms(r.get(c)) for c in cols) + f"   {sr} {ar}  {status}"
        )
    compiled = [r for r in rows if r["ok"]]
    print(
        f"\ntilegen compiles {len(compiled)}/{len(rows)} kernels; median over them of the ratio to tileiras:"
    )
    names = {
        "cli": "tilegen-tileiras, cold process",
        "cli_warm": "tilegen-tileiras, warm server",
        "compile": "tilegen compile, cold process",
        "compile_warm": "tilegen compile, warm server",
        "api": "tilegen.compile in process",
    }
    for c, label in names.items():
        if ratios[c]:
            print(f"  {label:<34} {_q(ratios[c])}")
    if spread:
        print(f"  noise: (max-min)/median of one command's {args.repeat} runs, median over all: "
              f"{statistics.median(spread):.0%}")  # fmt: skip
    print(f"  load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

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
        print(f"\n  median tilegen-tileiras cold process {ms(cli)} ms vs in-process {ms(api)} ms: "
              f"start-up + imports ~ {ms(cli - api)} ms")  # fmt: skip
    print("\n# start-up (fresh process each, median)")
    for k, v in starts.items():
        print(f"  {k:<45} {ms(v)} ms")


if __name__ == "__main__":
    sys.exit(main())
