"""``make gpu-check`` (bench/gpu_check.py + bench/gpu_runner.py), issue 12.

On this CPU machine: the payload is built for every corpus kernel (both compilers, sm_90 and
sm_100) and checked (contents, size, every cubin's parameter list against its npz), the runner's
dry run writes the report, the report is rendered from hand-made results, the ``ct.launch`` hook
hands cuTile the recorded cubins, and the runner's ctypes CUDA calls run against a stand-in
``libcuda.so.1`` compiled here. With a GPU, the payload runs for real.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import gpu_check  # noqa: E402
import gpu_runner  # noqa: E402

CORPUS = gpu_check.shared_dir() / "corpus" / "cutile"
needs_corpus = pytest.mark.skipif(
    not (CORPUS / "manifest.json").exists(), reason="cuTile corpus (../shared) not present"
)


def _valid_corpus_kernels() -> list[str]:
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    return sorted(k["name"] for k in manifest["kernels"] if not k.get("expect_tileiras_fail"))


@pytest.fixture(scope="module")
def payload(tmp_path_factory):
    if not (CORPUS / "manifest.json").exists():
        pytest.skip("cuTile corpus (../shared) not present")
    if gpu_check.nvidia_tool("tileiras") is None:
        pytest.skip("NVIDIA tileiras is not installed: the payload holds its cubins too")
    out = tmp_path_factory.mktemp("gpu-check") / "payload"
    p = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--out", str(out), "--offline"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return out, p.stdout


@needs_corpus
def test_every_corpus_kernel_in_the_payload(payload):
    out, _ = payload
    manifest = json.loads((out / "manifest.json").read_text())
    kernels = _valid_corpus_kernels()
    assert len(kernels) == 33 and sorted(manifest["kernels"]) == kernels
    assert manifest["archs"] == ["sm_90", "sm_100"]
    for name in kernels:
        k = manifest["kernels"][name]
        assert (out / k["npz"]).is_file()
        for arch in manifest["archs"]:
            assert set(k["cubins"][arch]) == {"tilegen", "tileiras"}, (name, arch, k["errors"])
            for rel in k["cubins"][arch].values():
                meta = gpu_runner.cubin_kernel((out / rel).read_bytes())
                assert meta["block"][0] >= 32 and meta["sizes"], (rel, meta)
    for case in manifest["large"]:
        assert case["kernel"] in manifest["kernels"]
    assert (out / "runner.py").read_text() == (ROOT / "bench" / "gpu_runner.py").read_text()
    assert "runner.py" in (out / "run.sh").read_text()
    assert subprocess.run(["bash", "-n", str(out / "run.sh")]).returncode == 0


@needs_corpus
def test_payload_fits_the_device_tool(payload):
    out, stdout = payload
    size = gpu_check.payload_size(out) + gpu_check.tracked_size()
    assert size < gpu_check.LIMIT, size
    assert "MiB of the 64 MiB the device tool carries" in stdout
    assert "33 corpus kernels, 132 corpus cubins" in stdout
    assert 'run(command="bash ' in stdout and "run.sh" in stdout and "carry=[" in stdout


@needs_corpus
def test_cutile_cases_recorded(payload):
    pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
    out, _ = payload
    sys.path.insert(0, str(ROOT / "tests"))
    from cutile_kernels import launch_cases

    cut = json.loads((out / "manifest.json").read_text())["cutile"]
    assert sorted(cut["cases"]) == sorted(c.name for c in launch_cases())
    assert (out / cut["kernels_py"]).read_text() == (ROOT / "tests/cutile_kernels.py").read_text()
    known: set = set()  # (case, compiler) pairs tilegen cannot build (none since the atomics fix)
    for name, case in cut["cases"].items():
        for arch in ("sm_90", "sm_100"):
            for compiler in ("tilegen", "tileiras"):
                rel = case["cubins"][arch].get(compiler)
                if (name, compiler) in known:
                    assert rel is None and "atomic_rmw" in case["errors"][arch][compiler]
                    continue
                assert rel and (out / rel).read_bytes()[:4] == b"\x7fELF", (name, arch, case)
                meta = gpu_runner.cubin_kernel((out / rel).read_bytes())
                assert meta["name"] == case["symbol"]


@needs_corpus
def test_recorded_compile_hands_cutile_the_cubin(payload):
    """The hook the runner installs at ``kernel._compile``: cuTile's launcher gets the cubin
    recorded for the signature it derived (here: tilegen.cutile.signature_for's)."""
    pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
    from cuda.tile._cext import default_tile_context

    from tilegen.cutile import signature_for

    out, _ = payload
    sys.path.insert(0, str(ROOT / "tests"))
    from cutile_kernels import kernels, launch_cases

    cut = json.loads((out / "manifest.json").read_text())["cutile"]
    case = next(c for c in launch_cases() if c.name == "softmax")
    kernel = kernels()["softmax"].kernel
    _, args = case.make(np.random.default_rng(0))
    state = {"compiler": "tileiras", "seen": []}
    original = gpu_runner.install_recorded_compile(out, cut, "sm_90", state)
    try:
        cubin, symbol, _, _ = kernel._compile(signature_for(kernel, args), default_tile_context)
        assert cubin == (out / cut["cases"]["softmax"]["cubins"]["sm_90"]["tileiras"]).read_bytes()
        assert symbol == cut["cases"]["softmax"]["symbol"]
        state["compiler"] = "tilegen"
        cubin, _, _, _ = kernel._compile(signature_for(kernel, args), default_tile_context)
        assert cubin == (out / cut["cases"]["softmax"]["cubins"]["sm_90"]["tilegen"]).read_bytes()
        # the other divisibility rule finds its own recorded cubin
        [alt] = cut["cases"]["softmax"]["alternatives"]
        cubin, symbol, _, _ = kernel._compile(
            gpu_check.gcd_variant(signature_for(kernel, args), args), default_tile_context
        )
        assert cubin == (out / alt["cubins"]["sm_90"]["tilegen"]).read_bytes()
        assert symbol == alt["symbol"] != cut["cases"]["softmax"]["symbol"]
        assert state["variants"] == ["launcher", "launcher", "gcd"]
        other = (np.zeros((10, 100), np.float64), np.zeros((10, 100), np.float64), 4, 128)
        with pytest.raises(gpu_runner.RunnerError, match="no recorded tilegen cubin"):
            kernel._compile(signature_for(kernel, other), default_tile_context)
        assert len(state["seen"]) == 4
    finally:
        from cuda.tile._execution import kernel as kernel_cls

        kernel_cls._compile = original


@needs_corpus
def test_dry_run_report(payload, tmp_path):
    out, _ = payload
    p = subprocess.run(
        [sys.executable, str(out / "runner.py"), str(out), "--dry-run", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    report = (tmp_path / "gpu_results.md").read_text()
    res = json.loads((tmp_path / "results.json").read_text())
    # every cubin parsed and every npz flattened to its cubin's parameter list
    assert {r[c]["status"] for r in res["corpus"] for c in ("tilegen", "tileiras")} == {"ok"}
    assert "corpus kernels correct on hardware: tilegen 33/33, tileiras 33/33" in report
    for name in _valid_corpus_kernels():
        assert f"\n| {name} | yes | yes |" in report
    for section in ("## Summary", "## Corpus kernels", "## Bandwidth and throughput", "cuTile"):
        assert section in report
    assert report in p.stdout


def _row(kernel, a, b, status_a="ok", status_b="ok"):
    return {
        "kernel": kernel,
        "tilegen": {
            "status": status_a,
            "ms": a,
            "detail": "" if status_a == "ok" else "x: 3 differ",
        },
        "tileiras": {"status": status_b, "ms": b, "detail": ""},
    }


def test_report_format():
    """The report from hand-made results: ratios, slower kernels, % of the measured peaks."""
    res = {
        "device": {"name": "NVIDIA H100 80GB HBM3", "sm": 90, "sms": 132, "driver_api": "13.0"},
        "arch": "sm_90",
        "repeat": 20,
        "date": "2026-11-25 01:00 UTC",
        "elapsed_s": 95.0,
        "manifest": {
            "built": "2026-11-25",
            "commit": "abc1234",
            "tileiras_version": "release 13.5",
            "archs": ["sm_90", "sm_100"],
        },
        "peaks": {
            "copy_gbs": 3000.0,
            "matmul_tflops": 700.0,
            "matmul_what": "torch",
            "matmul_size": 8192,
            "large_matmul_tflops": 600.0,
        },
        "corpus": [_row("vec_add", 0.010, 0.008), _row("softmax", 0.010, 0.020, "mismatch")],
        "large": [
            {
                "case": "vec_add 2^26",
                "kernel": "vec_add",
                "size": "67108864",
                "bytes": 805306368,
                "flops": None,
                **{k: v for k, v in _row("", 0.2980, 0.2800).items() if k != "kernel"},
            },
            {
                "case": "matmul_f16 4096^3",
                "kernel": "matmul_f16",
                "size": "4096 x 4096",
                "bytes": 0,
                "flops": 2 * 4096**3,
                **{k: v for k, v in _row("", 0.458, 0.229).items() if k != "kernel"},
            },
        ],
        "cutile": {"status": "ran", "cases": [{"case": "axpy", **_row("axpy", 0.005, 0.004)}]},
    }
    report = gpu_runner.render_report(res)
    assert report.startswith("# tilegen on NVIDIA H100 80GB HBM3 (sm_90)\n")
    assert "device-to-device copy 3000 GB/s" in report and "cuBLAS f16 matmul 700 TFLOP/s" in report
    assert "corpus kernels correct on hardware: tilegen 1/2, tileiras 2/2" in report
    assert "slower than tileiras (ratio > 1.05): vec_add" in report
    assert "| vec_add | yes | yes | 10.0 | 8.0 | 1.25 |  |" in report
    assert "| softmax | **NO** | yes | 10.0 | 20.0 | - | tilegen: x: 3 differ |" in report
    # 805306368 B in 0.2980 ms = 2702 GB/s = 90.1% of 3000
    assert "vec_add bandwidth: 90% of the copy bandwidth (goal >= 90%: met)" in report
    assert "2702 GB/s (90% of copy)" in report
    assert "300.1 TFLOP/s (50% of cuBLAS)" in report  # 2*4096^3 in 0.458 ms, cuBLAS 600
    assert "through cuTile (ct.launch, ran): tilegen 1/1 correct, tileiras 1/1" in report
    assert "| axpy | axpy | yes | yes | 5.0 | 4.0 | 1.25 |" in report


def test_pick_arch():
    assert gpu_runner.pick_arch(90, ["sm_90", "sm_100"]) == "sm_90"
    assert gpu_runner.pick_arch(100, ["sm_90", "sm_100"]) == "sm_100"
    assert gpu_runner.pick_arch(103, ["sm_90", "sm_100"]) == "sm_100"
    with pytest.raises(gpu_runner.RunnerError, match="not for sm_120"):
        gpu_runner.pick_arch(120, ["sm_90", "sm_100"])


FAKE_LIBCUDA = r"""
/* A stand-in libcuda.so.1 for the runner's ctypes calls: host memory, no kernel runs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef int R;
static FILE *lg(void) { static FILE *f; const char *p = getenv("FAKE_CUDA_LOG");
  if (!f && p) f = fopen(p, "a"); return f; }
R cuInit(unsigned f) { return f != 0; }
R cuDeviceGetCount(int *n) { *n = 1; return 0; }
R cuDeviceGet(int *d, int o) { *d = o; return o ? 101 : 0; }
R cuDevicePrimaryCtxRetain(void **c, int d) { *c = (void *)0x1234; return 0; }
R cuCtxSetCurrent(void *c) { return c == 0; }
R cuDeviceGetName(char *s, int n, int d) { snprintf(s, n, "fake GPU"); return 0; }
R cuDriverGetVersion(int *v) { *v = 13000; return 0; }
R cuDeviceGetAttribute(int *v, int a, int d) {
  *v = a == 75 ? 9 : a == 76 ? 0 : a == 16 ? 132 : -1; return *v < 0; }
R cuGetErrorName(R e, const char **s) { *s = "CUDA_ERROR_FAKE"; return 0; }
R cuMemAlloc_v2(uint64_t *p, size_t n) { *p = (uint64_t)(uintptr_t)calloc(1, n); return !*p; }
R cuMemFree_v2(uint64_t p) { free((void *)(uintptr_t)p); return 0; }
R cuMemcpyHtoD_v2(uint64_t d, const void *h, size_t n) { memcpy((void *)(uintptr_t)d, h, n); return 0; }
R cuMemcpyDtoH_v2(void *h, uint64_t d, size_t n) { memcpy(h, (void *)(uintptr_t)d, n); return 0; }
R cuMemcpyDtoD_v2(uint64_t d, uint64_t s, size_t n) {
  memcpy((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); return 0; }
R cuMemsetD8_v2(uint64_t d, unsigned char v, size_t n) { memset((void *)(uintptr_t)d, v, n); return 0; }
R cuLibraryLoadData(void **l, const void *code, void *a, void *b, unsigned n, void *c, void *d,
                    unsigned m) { if (memcmp(code, "\x7f" "ELF", 4)) return 200; *l = malloc(1); return 0; }
R cuLibraryGetKernel(void **k, void *l, const char *name) {
  if (!l || !name || !*name) return 500; *k = strdup(name); return 0; }
R cuKernelGetFunction(void **f, void *k) { *f = k; return 0; }
R cuLibraryUnload(void *l) { free(l); return 0; }
R cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                 unsigned bz, unsigned smem, void *stream, void **params, void **extra) {
  if (!f || !gx || !gy || !gz || !bx || !by || !bz || !params || extra) return 1;
  if (lg()) { fprintf(lg(), "%s %u %u %u %u\n", (char *)f, gx, gy, gz, bx); fflush(lg()); }
  return 0; }
R cuCtxSynchronize(void) { return 0; }
R cuEventCreate(void **e, unsigned f) { *e = malloc(8); return 0; }
R cuEventRecord(void *e, void *s) { return e == 0; }
R cuEventSynchronize(void *e) { return 0; }
R cuEventElapsedTime(float *ms, void *a, void *b) { *ms = 0.010f; return 0; }
R cuEventDestroy_v2(void *e) { free(e); return 0; }
"""


@needs_corpus
def test_runner_driver_calls_against_a_stand_in_libcuda(payload, tmp_path):
    """The runner's ctypes calls (load, params, launch, events, copies) against a stand-in
    libcuda: every launch reaches the driver with the cubin's kernel name and block size; the
    outputs are not computed (no kernel runs), so they read as mismatches, never as errors."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in libcuda.so.1")
    (tmp_path / "fake.c").write_text(FAKE_LIBCUDA)
    lib = tmp_path / "lib"
    lib.mkdir()
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", str(lib / "libcuda.so.1"), str(tmp_path / "fake.c")],
        check=True,
    )
    out, _ = payload
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib), FAKE_CUDA_LOG=str(tmp_path / "log"))
    cmd = [sys.executable, str(out / "runner.py"), str(out), "--out", str(tmp_path / "res")]
    cmd += ["--kernel", "vec_add", "--kernel", "matmul_f16", "--repeat", "2", "--scale", "1e-4"]
    cmd += ["--kernel", "control_if"]  # a scalar parameter: a 0-d argument, no pointer
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads((tmp_path / "res" / "results.json").read_text())
    assert res["device"] == {"name": "fake GPU", "sm": 90, "sms": 132, "driver_api": "13.0"}
    rows = res["corpus"] + res["large"]
    assert {r[c]["status"] for r in rows for c in ("tilegen", "tileiras")} == {"mismatch"}
    assert all(r[c]["ms"] == pytest.approx(0.010) for r in rows for c in ("tilegen", "tileiras"))
    log = (tmp_path / "log").read_text().splitlines()
    manifest = json.loads((out / "manifest.json").read_text())
    grid = gpu_runner.load_npz(out / manifest["kernels"]["vec_add"]["npz"])[2]
    keys = []
    for compiler in ("tilegen", "tileiras"):
        meta = gpu_runner.cubin_kernel(
            (out / manifest["kernels"]["vec_add"]["cubins"]["sm_90"][compiler]).read_bytes()
        )
        keys.append(f"{meta['name']} {' '.join(map(str, grid))} {meta['block'][0]}")
    # per compiler: the decoy launch (zeroed float arrays elsewhere: Driver.run) + the corpus
    # launch + a warm-up + 2 timed, with the corpus grid and the block
    for key in set(keys):
        assert log.count(key) == 5 * keys.count(key), key


@needs_corpus
def test_perf_cases_recorded(payload):
    """Every throughput case of bench/gpu_perf_cases.py has both compilers' sm_90 cubins for
    the signature the launcher derives, the tilegen variants beside them, and the modules the
    GPU side imports."""
    out, _ = payload
    pytest.importorskip("cuda.tile")
    sys.path.insert(0, str(ROOT / "tests"))
    import gpu_perf_cases as perf

    manifest = json.loads((out / "manifest.json").read_text())
    cases = manifest["perf"]["cases"]
    assert list(cases) == [c.name for c in perf.cases()]
    for name, rec in cases.items():
        built = rec["cubins"]["sm_90"]
        assert {"tilegen", "tileiras"} <= set(built), (name, rec.get("errors"))
        assert set(built) - {"tilegen", "tileiras"} == {
            f"tilegen {label}" for label in perf.VARIANTS.get(name, {})
        }
        for arch in manifest["archs"]:
            for rel in rec["cubins"][arch].values():
                # the case's own kernel: a num_ctas=2 form or another function of the same
                # argument types has cubins of its own
                meta = gpu_runner.cubin_kernel((out / rel).read_bytes())
                assert meta["name"] == rec["symbol"], (name, arch, rel)
        assert perf.reference_kind(perf.cases()[list(cases).index(name)])
    for f in ("gpu_perf_cases.py", "cutile_kernels_async.py", "cutile_kernels.py"):
        assert (out / "cutile" / f).is_file()


@needs_corpus
def test_recorded_compile_picks_the_case(payload):
    """A num_ctas=2 case shares its Python function (and argument types) with the one-CTA
    case: the hook hands cuTile the cubin of the case being run."""
    pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
    from cuda.tile._cext import default_tile_context

    from tilegen.cutile import signature_for

    out, _ = payload
    sys.path.insert(0, str(ROOT / "tests"))
    import gpu_perf_cases as perf

    info = json.loads((out / "manifest.json").read_text())["perf"]
    ks = perf.kernels()
    by_name = {c.name: c for c in perf.cases()}
    pair, one = next(
        (p, o)
        for p, cp in by_name.items()
        for o, co in by_name.items()
        if cp.kernel == "gemm_pair" and co.kernel == "gemm" and cp.args == co.args
    )
    for name in (pair, one):
        case = by_name[name]
        state = {"compiler": "tilegen", "seen": [], "case": name}
        original = gpu_runner.install_recorded_compile(out, info, "sm_90", state)
        try:
            kernel = ks[case.kernel]
            sig = signature_for(kernel, perf.numpy_args(case))
            cubin, symbol, _, _ = kernel._compile(sig, default_tile_context)
        finally:
            from cuda.tile._execution import kernel as kernel_cls

            kernel_cls._compile = original
        rec = info["cases"][name]
        assert cubin == (out / rec["cubins"]["sm_90"]["tilegen"]).read_bytes()
        assert symbol == rec["symbol"] == gpu_runner.cubin_kernel(cubin)["name"]
    assert info["cases"][pair]["symbol"] != info["cases"][one]["symbol"]


def test_perf_report_section():
    """The throughput table: TFLOP/s per compiler, the time ratio, % of the library, and the
    variant table relative to the default tilegen build."""
    ok = gpu_runner._result
    rows = [
        {
            "case": "gemm f16 4096^3",
            "kernel": "gemm",
            "flops": 2 * 4096**3,
            "tilegen": ok("ok", 0.3),
            "tileiras": ok("ok", 0.25),
            "tilegen num_stages=3": ok("ok", 0.6),
            "baseline_ms": 0.2,
            "baseline_what": "cuBLAS",
        },
        {
            "case": "attention",
            "kernel": "attention_causal_fwd",
            "flops": 10**12,
            "tilegen": ok("mismatch", 1.0, "relative error 3e-1 > 0.02"),
            "tileiras": ok("not built", detail="e"),
            "baseline_ms": None,
            "baseline_what": "no library baseline",
        },
    ]
    text = "\n".join(gpu_runner._perf_section({"status": "ran", "cases": rows}))
    assert "| gemm f16 4096^3 | yes | yes | 458 | 550 | 1.20 | 687 | 67% | cuBLAS |  |" in text
    assert "| attention | **NO** | not built | - | - | - | - | - |" in text
    assert "| gemm f16 4096^3 | num_stages=3 | yes | 229 | 2.00 |" in text
    skipped = gpu_runner._perf_section({"status": "skipped", "reason": "no torch"})
    assert skipped[-1] == "skipped: no torch"
    # NVML's view around the timed rounds, and a timing fault, go into the notes
    rows[0].update(
        gpu_before={"sm_clock_mhz": 1980, "temperature_c": 41},
        gpu_after={"sm_clock_mhz": 1755, "temperature_c": 63},
        timing_error="RuntimeError: launch failed",
    )
    text = "\n".join(gpu_runner._perf_section({"status": "ran", "cases": rows}))
    assert "| cuBLAS | timing: RuntimeError: launch failed; 1980 -> 1755 MHz; 41 -> 63 C |" in text


def test_contenders_are_timed_in_interleaved_rounds():
    """Each round times one batch of every contender in turn (so a clock that drifts over the
    run is shared alike); each contender's median over the rounds."""
    calls, clock = [], [0.0]

    class Event:  # (a CUDA event on a fake clock: each call of a contender costs its time)
        def record(self):
            self.t = clock[0]

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return other.t - self.t

    def contender(name, ms):
        def fn():
            calls.append(name)
            clock[0] += ms + 0.01 * len(calls)  # (slower as the run goes on)

        return fn

    fns = {"a": contender("a", 1.0), "b": contender("b", 2.0), "lib": contender("lib", 0.5)}
    got = gpu_runner._time_interleaved(fns, lambda: None, Event, batches=3, per_batch=2)
    assert calls[:3] == ["a", "b", "lib"]  # the warm-up calls
    assert calls[3:] == (["a"] * 2 + ["b"] * 2 + ["lib"] * 2) * 3
    assert set(got) == {"a", "b", "lib"}
    # the drift (0.01 ms a call so far) is shared: b - a is 1 ms plus two calls' drift
    assert abs(got["b"] - got["a"] - (1.0 + 0.02)) < 1e-9
    assert got["lib"] < got["a"] < got["b"]


def test_gpu_run(tmp_path):
    """The whole check on a real GPU (skipped without one)."""
    try:
        gpu_runner.Driver()
    except gpu_runner.RunnerError as e:
        pytest.skip(f"no GPU: {e}")
    if not (CORPUS / "manifest.json").exists():
        pytest.skip("cuTile corpus (../shared) not present")
    out = tmp_path / "payload"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--out", str(out), "--offline"],
        check=True,
        timeout=1800,
    )
    p = subprocess.run(
        [sys.executable, str(out / "runner.py"), str(out), "--out", str(tmp_path / "res")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads((tmp_path / "res" / "results.json").read_text())
    bad = {r["kernel"]: r["tilegen"] for r in res["corpus"] if r["tilegen"]["status"] != "ok"}
    assert not bad, bad


def test_grouped_block_order_is_a_bijection_in_groups_of_rows():
    """gpu-check's grouped8 PTX experiment: a kernel writing its (bid 0, bid 1) at its launch
    order, patched and run in ptxsim on grids whose width is and is not a multiple of the
    group: every block id once, launch order walking ``group`` rows for each column."""
    from tilegen.runtime.ptx.launch import run_ptx

    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_perf_cases as perf

    group = 8
    src = (
        ".version 8.0\n.target sm_90\n.address_size 64\n"
        ".visible .entry ids(.param .u64 out, .param .u32 out_n, .param .u32 out_s) .reqntid 1\n"
        "{\n\t.reg .b32 \t%r<12>;\n\t.reg .b64 \t%rd<4>;\n"
        "\tld.param.u64 %rd1, [out];\n\tcvta.to.global.u64 %rd1, %rd1;\n"
        "\tmov.u32 %r1, %ctaid.x;\n\tmov.u32 %r2, %ctaid.y;\n"
        # the launch order l = x + y nx, from the patch's own copies of %ctaid (%tgbo0, 1)
        "\tmov.u32 %r3, %nctaid.x;\n"
        "\tmov.u32 %r4, %tgbo0;\n\tmov.u32 %r5, %tgbo1;\n"
        "\tmad.lo.u32 %r6, %r5, %r3, %r4;\n"
        "\tmul.wide.u32 %rd2, %r6, 8;\n\tadd.s64 %rd3, %rd1, %rd2;\n"
        "\tst.global.v2.u32 [%rd3], {%r1, %r2};\n\tret;\n}\n"
    )
    patched = perf.grouped_block_order(src, group)
    assert patched.count("%ctaid.x") == 1 and "\t.reg .b32 \t%tgbo<8>;" in patched
    for nx, ny in ((20, 3), (16, 5), (5, 4), (1, 7)):
        (out,) = run_ptx(patched, [np.zeros(2 * nx * ny, np.uint32)], (nx, ny, 1))
        ids = [tuple(int(v) for v in out[2 * i : 2 * i + 2]) for i in range(nx * ny)]
        assert sorted(ids) == [(x, y) for x in range(nx) for y in range(ny)], (nx, ny)
        # the first group: rows 0 .. min(group, nx) - 1 of column 0, then of column 1, ...
        width = min(group, nx)
        assert ids[: 2 * width] == [(x, 0) for x in range(width)] + [(x, 1) for x in range(width)]
    with pytest.raises(ValueError, match="both"):
        perf.grouped_block_order(src.replace("\tmov.u32 %r2, %ctaid.y;\n", ""), group)


@needs_corpus
def test_grouped_block_order_keeps_a_tma_gemm_correct():
    """The corpus's f16 GEMM on the async path (sm_90a), patched: every one of its 5 x 3 tiles
    still computed once (strict ptxsim against NumPy; ptxas takes the patched PTX)."""
    from tilegen.runtime import driver
    from tilegen.runtime.options import CompileOptions
    from tilegen.runtime.ptx.launch import run_ptx

    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_perf_cases as perf

    c = driver.compile_source(
        CORPUS / "out" / "matmul_f16.tileirbc", CompileOptions(target="sm_90a"), until="ptx"
    )
    assert c.async_plan[0].taken
    ptx = perf.grouped_block_order(c.ptx, 2)
    M, N, K = 300, 180, 40
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float16)
    out = run_ptx(ptx, [a, b, np.zeros((M, N), np.float32)], (5, 3, 1), strict_async=True)
    np.testing.assert_allclose(out[2], a.astype(np.float32) @ b.astype(np.float32), atol=1e-4)
