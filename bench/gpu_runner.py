"""Run the ``make gpu-check`` payload on a GPU: launch every cubin, check it, time it, report.

``python runner.py PAYLOAD [--out DIR] [--repeat N] [--dry-run] [--kernel NAME ...]``

Needs only Python 3 and NumPy: the CUDA driver is called through ``ctypes`` on
``libcuda.so.1`` (no cuda-python, cupy or torch). torch, when importable, measures cuBLAS's
matmul rate as the compute peak; the cuTile part needs torch and the ``cuda-tile`` wheel the
payload carries (``run.sh`` installs it).

PAYLOAD is what ``bench/gpu_check.py`` built (``manifest.json`` describes it):

1. **corpus**: every corpus kernel's cubin from tilegen and from tileiras, for the device's
   architecture, launched on the corpus inputs (``data/<k>.npz``: ``arg__*`` in parameter order,
   ``expected__*``, ``grid``) and compared within the corpus tolerances; then timed (median of
   ``--repeat`` launches between CUDA events, after a warm-up launch). Arguments follow cuTile's
   calling convention (array -> pointer, shape..., strides...; scalar -> one param; sizes from
   ``EIATTR_KPARAM_INFO``), the block size is ``EIATTR_REQNTID``, and cubins are loaded with
   ``cuLibraryLoadData`` as cuTile does, so the driver runs the host code tileiras embeds
   (``.nv.host``) to fill the hidden TMA tensor-map parameters.
2. **large**: vec_add, softmax and layernorm at sizes that measure bandwidth (bytes of every
   array read once and written once / time, beside a device-to-device copy's rate, read + write
   counted) and matmul_f16 at 4096^3 (TFLOP/s beside ``torch.matmul`` on the same shapes).
3. **cuTile**: ``ct.launch`` of the kernels of ``cutile/cutile_kernels.py`` on the inputs of its
   ``launch_cases()``, checked against their NumPy references. Neither tileiras (it needs
   libnvvm and a 13.5 ptxas: ~64 MB compressed) nor a 13.5 ptxas travels, so both compilers'
   cubins were built on the CPU machine for the signature cuTile's launcher derives from those
   arguments; ``kernel._compile`` (what the launcher calls on a cache miss) hands cuTile the
   recorded cubin, keyed by that signature. A signature that was not predicted is reported.

Writes ``DIR/results.json`` and ``DIR/gpu_results.md`` (the Markdown report) and prints the
report. ``--dry-run`` needs no GPU: it checks the payload (every cubin parses, every npz's
arguments flatten to the cubin's parameter list, every recorded cuTile cubin exists), feeds
fake timings through the same code and writes the same report.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import hashlib
import json
import math
import platform
import struct
import sys
import time
from pathlib import Path

import numpy as np

EIATTR_REQNTID = 0x10
EIATTR_MAX_THREADS = 0x05
EIATTR_KPARAM_INFO = 0x17
EIATTR_KPARAM_INFO_V2 = 0x45
EIATTR_LANGUAGE = 0x66
COMPILERS = ("tilegen", "tileiras")
SLOWER = 1.05  # a ratio above this counts as "slower than tileiras"


class RunnerError(Exception):
    pass


# --- cubin (ELF64) reading -------------------------------------------------------------------


def _sections(data: bytes) -> dict[str, bytes]:
    if data[:4] != b"\x7fELF":
        raise RunnerError("not an ELF file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    raw = []
    for i in range(shnum):
        name, typ, _f, _a, off, size, _l, _i = struct.unpack_from(
            "<IIQQQQII", data, shoff + i * shentsize
        )
        raw.append((name, b"" if typ == 8 else data[off : off + size]))
    strtab = raw[shstrndx][1]
    return {strtab[n : strtab.index(b"\0", n)].decode(): body for n, body in raw}


def _nv_info(body: bytes):
    pos = 0
    while pos + 4 <= len(body):
        fmt, attr = body[pos], body[pos + 1]
        if fmt == 4:  # EIFMT_SVAL: u16 size, then the value
            size = struct.unpack_from("<H", body, pos + 2)[0]
            yield attr, body[pos + 4 : pos + 4 + size]
            pos += 4 + size
        else:
            yield attr, body[pos + 2 : pos + 4]
            pos += 4


def cubin_kernel(data: bytes) -> dict:
    """name, param sizes (ordinal order), block dims, whether it carries EIATTR_LANGUAGE (a Tile
    IR kernel whose block size the driver takes from the cubin) and embedded host code."""
    secs = _sections(data)
    names = [n[len(".text.") :] for n in secs if n.startswith(".text.")]
    if len(names) != 1:
        raise RunnerError(f"expected one kernel, found {names}")
    name = names[0]
    params: dict[int, int] = {}
    block = None
    language = False
    for attr, value in _nv_info(secs.get(f".nv.info.{name}", b"")):
        if attr == EIATTR_KPARAM_INFO and len(value) >= 12:
            _index, ordinal, _offset, flags = struct.unpack_from("<IHHI", value)
            params[ordinal] = (flags >> 18) & 0x3FFF
        elif attr == EIATTR_KPARAM_INFO_V2 and len(value) >= 12:  # tileiras's cubins
            _index, ordinal, _offset, flags = struct.unpack_from("<IHHI", value)
            params[ordinal] = flags & 0xFFFF
        elif attr in (EIATTR_REQNTID, EIATTR_MAX_THREADS) and block is None:
            dims = struct.unpack_from(f"<{len(value) // 4}I", value)
            block = tuple((list(dims) + [1, 1])[:3])
        elif attr == EIATTR_LANGUAGE:
            language = True
    if block is None:
        raise RunnerError(f"{name}: no REQNTID/MAX_THREADS; block size unknown")
    return {
        "name": name,
        "sizes": [params[i] for i in sorted(params)],
        "block": block,
        "language": language,
        "host_code": ".nv.host" in secs,
    }


# --- arguments --------------------------------------------------------------------------------


def load_npz(path: Path):
    with np.load(path) as d:
        args = [(k[len("arg__") :], d[k]) for k in d.files if k.startswith("arg__")]
        expected = {k[len("expected__") :]: d[k] for k in d.files if k.startswith("expected__")}
        grid = tuple(int(x) for x in d["grid"].reshape(-1)) if "grid" in d.files else (1, 1, 1)
    return args, expected, grid


def flat_params(args, ptrs) -> list:
    """cuTile's flat parameters: each array (pointer, shape..., strides in elements...), each
    0-d array its scalar."""
    flat, it = [], iter(ptrs)
    for _name, a in args:
        a = np.asarray(a)
        if a.ndim == 0:
            flat.append(a)
            continue
        flat += [next(it), *a.shape, *(s // a.itemsize for s in a.strides)]
    return flat


def pack(value, size: int) -> ctypes.Array:
    """``size`` little-endian bytes for a param value (a float scalar keeps its dtype's bits)."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        raw = value.astype(np.float32 if size == 4 else np.float64).tobytes()
    else:
        v = int(value.item() if isinstance(value, np.ndarray) else value)
        raw = (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    return (ctypes.c_ubyte * size).from_buffer_copy(raw)


def compare(got: dict, expected: dict, rtol: float, atol: float) -> list[str]:
    bad = []
    for name, want in expected.items():
        g = got.get(name)
        if g is None or g.shape != want.shape:
            bad.append(f"{name}: missing or shape {None if g is None else g.shape}")
        elif want.dtype.kind == "f":
            ok = np.isclose(g, want, rtol=rtol, atol=atol, equal_nan=True)
            if not ok.all():
                bad.append(f"{name}: {int((~ok).sum())} of {ok.size} element(s) differ")
        elif not np.array_equal(g, want):
            bad.append(f"{name}: {int((g != want).sum())} element(s) differ")
    return bad


# --- the CUDA driver through ctypes ----------------------------------------------------------


class Driver:
    """The few CUDA driver calls the runner needs, through ctypes on libcuda."""

    def __init__(self, ordinal: int = 0):
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise RunnerError(f"no CUDA driver: {e}") from None
        self.check(self.lib.cuInit(0), "cuInit")
        count = ctypes.c_int()
        self.check(self.lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        if count.value <= ordinal:
            raise RunnerError(f"no CUDA device {ordinal} ({count.value} visible)")
        dev = ctypes.c_int()
        self.check(self.lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
        self.dev = dev.value
        ctx = ctypes.c_void_p()
        self.check(
            self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), self.dev),
            "cuDevicePrimaryCtxRetain",
        )
        self.check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        self.ctx = ctx
        name = ctypes.create_string_buffer(256)
        self.lib.cuDeviceGetName(name, 256, self.dev)
        version = ctypes.c_int()
        self.lib.cuDriverGetVersion(ctypes.byref(version))
        self.info = {
            "name": name.value.decode(),
            "sm": 10 * self.attr(75) + self.attr(76),  # COMPUTE_CAPABILITY_MAJOR / MINOR
            "sms": self.attr(16),  # MULTIPROCESSOR_COUNT
            "driver_api": f"{version.value // 1000}.{version.value % 1000 // 10}",
        }

    def attr(self, which: int) -> int:
        v = ctypes.c_int()
        self.check(self.lib.cuDeviceGetAttribute(ctypes.byref(v), which, self.dev), "attribute")
        return v.value

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            s = ctypes.c_char_p()
            self.lib.cuGetErrorName(rc, ctypes.byref(s))
            raise RunnerError(f"{what} failed: {s.value.decode() if s.value else rc}")

    def alloc(self, nbytes: int) -> int:
        p = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(p), max(int(nbytes), 1)), "cuMemAlloc")
        return p.value

    def free(self, ptr: int) -> None:
        self.lib.cuMemFree_v2(ctypes.c_uint64(ptr))

    def htod(self, ptr: int, host: np.ndarray) -> None:
        if host.nbytes:
            c = np.ascontiguousarray(host)
            self.check(
                self.lib.cuMemcpyHtoD_v2(
                    ctypes.c_uint64(ptr),
                    c.ctypes.data_as(ctypes.c_void_p),
                    ctypes.c_size_t(c.nbytes),
                ),
                "cuMemcpyHtoD",
            )

    def dtoh(self, host: np.ndarray, ptr: int) -> None:
        if host.nbytes:
            self.check(
                self.lib.cuMemcpyDtoH_v2(
                    host.ctypes.data_as(ctypes.c_void_p),
                    ctypes.c_uint64(ptr),
                    ctypes.c_size_t(host.nbytes),
                ),
                "cuMemcpyDtoH",
            )

    def load(self, cubin: bytes, name: str):
        """(function handle, unload callable); cuLibraryLoadData like cuTile (the driver then
        runs tileiras's embedded host callbacks), cuModuleLoadData on drivers without it."""
        lib = self.lib
        buf = ctypes.create_string_buffer(cubin, len(cubin))
        if hasattr(lib, "cuLibraryLoadData"):
            library, kern, func = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
            self.check(
                lib.cuLibraryLoadData(ctypes.byref(library), buf, None, None, 0, None, None, 0),
                "cuLibraryLoadData",
            )
            try:
                self.check(
                    lib.cuLibraryGetKernel(ctypes.byref(kern), library, name.encode()),
                    "cuLibraryGetKernel",
                )
                self.check(lib.cuKernelGetFunction(ctypes.byref(func), kern), "cuKernelGetFunction")
            except RunnerError:
                lib.cuLibraryUnload(library)
                raise
            return func, lambda: lib.cuLibraryUnload(library)
        module, func = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(lib.cuModuleLoadData(ctypes.byref(module), buf), "cuModuleLoadData")
        self.check(
            lib.cuModuleGetFunction(ctypes.byref(func), module, name.encode()),
            "cuModuleGetFunction",
        )
        return func, lambda: lib.cuModuleUnload(module)

    def launch(self, func, grid, block, params: list) -> None:
        pointers = (ctypes.c_void_p * max(1, len(params)))(*[ctypes.addressof(v) for v in params])
        self.check(
            self.lib.cuLaunchKernel(
                func,
                *[ctypes.c_uint(int(g)) for g in grid],
                *[ctypes.c_uint(int(b)) for b in block],
                0,
                None,
                pointers,
                None,
            ),
            "cuLaunchKernel",
        )

    def sync(self, what: str = "kernel") -> None:
        self.check(self.lib.cuCtxSynchronize(), what)

    def time_ms(self, fn, repeat: int) -> float:
        """Median ms of ``fn()`` over ``repeat`` runs between CUDA events (one warm-up run)."""
        start, stop = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(self.lib.cuEventCreate(ctypes.byref(start), 0), "cuEventCreate")
        self.check(self.lib.cuEventCreate(ctypes.byref(stop), 0), "cuEventCreate")
        try:
            fn()
            self.sync()
            times = []
            for _ in range(repeat):
                self.check(self.lib.cuEventRecord(start, None), "cuEventRecord")
                fn()
                self.check(self.lib.cuEventRecord(stop, None), "cuEventRecord")
                self.check(self.lib.cuEventSynchronize(stop), "cuEventSynchronize")
                ms = ctypes.c_float()
                self.check(self.lib.cuEventElapsedTime(ctypes.byref(ms), start, stop), "elapsed")
                times.append(ms.value)
            return float(np.median(times))
        finally:
            self.lib.cuEventDestroy_v2(start)
            self.lib.cuEventDestroy_v2(stop)

    def copy_gbs(self, nbytes: int = 1 << 30, repeat: int = 10) -> float:
        """Device-to-device copy rate, bytes read plus bytes written per second / 1e9."""
        a, b = self.alloc(nbytes), self.alloc(nbytes)
        try:
            self.check(
                self.lib.cuMemsetD8_v2(ctypes.c_uint64(a), 1, ctypes.c_size_t(nbytes)), "cuMemsetD8"
            )

            def copy():
                self.check(
                    self.lib.cuMemcpyDtoD_v2(
                        ctypes.c_uint64(b), ctypes.c_uint64(a), ctypes.c_size_t(nbytes)
                    ),
                    "cuMemcpyDtoD",
                )

            ms = self.time_ms(copy, repeat)
        finally:
            self.free(a)
            self.free(b)
        return 2 * nbytes / (ms * 1e-3) / 1e9

    def run(self, cubin: bytes, args, grid, repeat: int, expected=None):
        """(arrays after one launch, by name; median ms over ``repeat`` more launches).

        A decoy launch comes first: the same module, its float arrays zeroed at other
        addresses (integer ones copied: indices stay valid). A kernel whose CTAs share
        device-built tensor maps within a launch (docs/pipelines.md section 57) must not take
        the decoy launch's maps: if it did, it would read the zeros and fail the comparison."""
        del expected  # what FakeDriver answers with
        meta = cubin_kernel(cubin)
        func, unload = self.load(cubin, meta["name"])
        ptrs, hosts, decoys = [], [], []
        try:
            self._decoy(func, meta, args, grid, decoys)
            for arg_name, a in args:
                a = np.asarray(a)
                if a.ndim == 0:
                    continue
                c = np.ascontiguousarray(a)
                ptr = self.alloc(c.nbytes)
                ptrs.append(ptr)
                self.htod(ptr, c)
                hosts.append((arg_name, c))
            # np.ascontiguousarray makes a 0-d array 1-d: scalars stay as they are
            flat = flat_params(
                [(n, a if np.ndim(a) == 0 else np.ascontiguousarray(a)) for n, a in args], ptrs
            )
            if len(flat) != len(meta["sizes"]):
                raise RunnerError(
                    f"{meta['name']}: {len(meta['sizes'])} params, arguments flatten to {len(flat)}"
                )
            values = [pack(v, s) for v, s in zip(flat, meta["sizes"])]
            g = tuple((list(grid) + [1, 1])[:3])
            self.launch(func, g, meta["block"], values)
            self.sync()
            out = {}
            for ptr, (arg_name, c) in zip(ptrs, hosts):
                host = np.empty_like(c)
                self.dtoh(host, ptr)
                out[arg_name] = host
            ms = None
            if repeat > 0:
                ms = self.time_ms(lambda: self.launch(func, g, meta["block"], values), repeat)
            return out, ms
        finally:
            for ptr in ptrs + decoys:
                self.free(ptr)
            unload()

    def _decoy(self, func, meta: dict, args, grid, ptrs: list) -> None:
        """Launch ``func`` on zeroed copies of the float arrays of ``args`` (kept allocated, in
        ``ptrs``, until the real launch is done, so that its arrays land elsewhere)."""
        for _, a in args:
            a = np.asarray(a)
            if a.ndim == 0:
                continue
            c = np.ascontiguousarray(a)
            if c.dtype.kind in "fcV":
                c = np.zeros_like(c)
            ptr = self.alloc(c.nbytes)
            ptrs.append(ptr)
            self.htod(ptr, c)
        flat = flat_params(
            [(n, a if np.ndim(a) == 0 else np.ascontiguousarray(a)) for n, a in args], ptrs
        )
        if len(flat) != len(meta["sizes"]):
            return  # (the real launch reports it)
        values = [pack(v, s) for v, s in zip(flat, meta["sizes"])]
        self.launch(func, tuple((list(grid) + [1, 1])[:3]), meta["block"], values)
        self.sync("decoy launch")


class FakeDriver:
    """``--dry-run``: the payload is checked and parsed, nothing is launched; every launch
    "matches" and takes a time derived from its cubin's bytes."""

    info = {"name": "dry run (no GPU)", "sm": 90, "sms": 0, "driver_api": "-"}

    def copy_gbs(self, *_a, **_k) -> float:
        return 3000.0

    def run(self, cubin: bytes, args, grid, repeat: int, expected=None):
        """Checks the arguments against the cubin's parameters; answers with ``expected``."""
        meta = cubin_kernel(cubin)
        flat = flat_params(args, [0] * len(args))
        if len(flat) != len(meta["sizes"]):
            raise RunnerError(
                f"{meta['name']}: {len(meta['sizes'])} params, arguments flatten to {len(flat)}"
            )
        out = {n: np.array(a) for n, a in args if np.asarray(a).ndim}
        for name, want in (expected or {}).items():
            if isinstance(want, tuple):  # sampled rows (the large matmul)
                out[name][want[0]] = want[1]
            else:
                out[name] = want
        return out, 0.005 + (int(hashlib.sha256(cubin).hexdigest()[:4], 16) % 1000) / 1e5


# --- the large cases: inputs, references, traffic ---------------------------------------------


def _tile_suffix(symbol: str, default: int) -> int:
    import re

    m = re.search(r"_I(\d+)$", symbol)
    return int(m.group(1)) if m else default


def large_case(case: dict, scale: float = 1.0, seed: int = 0):
    """(args, expected, grid, bytes moved, flops, rtol, atol) of a large case (``scale``
    shrinks it for the dry run)."""
    rng = np.random.default_rng(seed)
    kind = case["kind"]
    if kind == "vec_add":
        n = max(1024, int(case["n"] * scale))
        a = rng.standard_normal(n, dtype=np.float32)
        b = rng.standard_normal(n, dtype=np.float32)
        args = [("a", a), ("b", b), ("c", np.zeros(n, np.float32))]
        return args, {"c": a + b}, (math.ceil(n / case["tile"]), 1, 1), 3 * 4 * n, None, 1e-6, 0
    if kind == "softmax":
        rows = max(64, int(case["rows"] * scale))
        x = rng.standard_normal((rows, case["cols"]), dtype=np.float32)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        want = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        args = [("x", x), ("out", np.zeros_like(x))]
        return (
            args,
            {"out": want},
            (math.ceil(rows / case["tm"]), 1, 1),
            2 * x.nbytes,
            None,
            1e-5,
            1e-7,
        )
    if kind == "layernorm":
        rows = max(64, int(case["rows"] * scale))
        n = case["cols"]
        x = rng.standard_normal((rows, n)).astype(np.float16)
        w = rng.standard_normal(n).astype(np.float16)
        b = rng.standard_normal(n).astype(np.float16)
        xf = x.astype(np.float32)
        d = xf - xf.mean(axis=1, keepdims=True)
        y = d / np.sqrt((d * d).mean(axis=1, keepdims=True) + case["eps"])
        want = (y * w.astype(np.float32) + b.astype(np.float32)).astype(np.float16)
        args = [("x", x), ("w", w), ("b", b), ("out", np.zeros_like(x))]
        nbytes = 2 * x.nbytes + w.nbytes + b.nbytes
        return args, {"out": want}, (math.ceil(rows / case["tm"]), 1, 1), nbytes, None, 2e-3, 2e-3
    if kind == "matmul":
        m = n = k = max(128, int(case["size"] * scale ** (1 / 3)) // 128 * 128)
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        rows = rng.choice(m, size=min(m, 64), replace=False)
        want_rows = a[rows].astype(np.float32) @ b.astype(np.float32)
        args = [("A", a), ("B", b), ("C", np.zeros((m, n), np.float32))]
        grid = (math.ceil(m / case["tm"]), math.ceil(n / case["tn"]), 1)
        nbytes = a.nbytes + b.nbytes + 4 * m * n
        return args, {"C": (rows, want_rows)}, grid, nbytes, 2 * m * n * k, 1e-2, 1e-2
    raise RunnerError(f"unknown large case kind {kind!r}")


def compare_large(got: dict, expected: dict, rtol: float, atol: float) -> list[str]:
    plain = {k: v for k, v in expected.items() if not isinstance(v, tuple)}
    bad = compare(got, plain, rtol, atol)
    for name, (rows, want) in ((k, v) for k, v in expected.items() if isinstance(v, tuple)):
        g = got[name][rows]
        ok = np.isclose(g, want, rtol=rtol, atol=atol * np.abs(want).max())
        if not ok.all():
            bad.append(f"{name}: {int((~ok).sum())} of {ok.size} sampled element(s) differ")
    return bad


# --- peaks ----------------------------------------------------------------------------------


def torch_matmul_tflops(size: int, repeat: int, dry: bool) -> tuple[float | None, str]:
    """cuBLAS f16 matmul rate at ``size``^3 through torch (None with the reason without it)."""
    if dry:
        return 500.0, "dry run"
    try:
        import torch
    except ImportError:
        return None, "torch not installed"
    if not torch.cuda.is_available():
        return None, "torch sees no GPU"
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    torch.matmul(a, b)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.matmul(a, b)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return 2 * size**3 / (float(np.median(times)) * 1e-3) / 1e12, f"torch {torch.__version__}"


# --- the parts ------------------------------------------------------------------------------


def _result(status: str, ms=None, detail: str = "") -> dict:
    return {"status": status, "ms": ms, "detail": detail}


def isolated(args, part: str, item: str, fallback: dict, timeout: int = 120) -> dict:
    """Run one corpus kernel or large case in a child process (``--worker``), so that a kernel
    that faults (a sticky CUDA error ends its context) costs only its own row."""
    import subprocess

    cmd = [sys.executable, __file__, str(args.payload), "--worker", f"{part}:{item}"]
    cmd += ["--repeat", str(args.repeat), "--device", str(args.device), "--scale", str(args.scale)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        why = f"timed out ({timeout} s)"
        return {**fallback, **{c: _result("error", detail=why) for c in COMPILERS}}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1][:300]
    return {**fallback, **{c: _result("error", detail=f"worker died: {why}") for c in COMPILERS}}


def corpus_row(dev, payload: Path, manifest: dict, arch: str, repeat: int, name: str) -> dict:
    k = manifest["kernels"][name]
    row = {"kernel": name}
    args, expected, grid = load_npz(payload / k["npz"])
    rtol, atol = k["tolerance"]
    for compiler in COMPILERS:
        rel = k["cubins"].get(arch, {}).get(compiler)
        if rel is None:
            why = k.get("errors", {}).get(arch, {}).get(compiler, "not built")
            row[compiler] = _result("not built", detail=why)
            continue
        try:
            got, ms = dev.run((payload / rel).read_bytes(), args, grid, repeat, expected)
        except RunnerError as e:
            row[compiler] = _result("error", detail=str(e))
            continue
        bad = compare(got, expected, rtol, atol)
        row[compiler] = _result("mismatch" if bad else "ok", ms, "; ".join(bad))
    return row


def large_row(dev, payload: Path, manifest: dict, arch: str, repeat: int, scale: float, i: int):
    case = manifest["large"][i]
    args, expected, grid, nbytes, flops, rtol, atol = large_case(case, scale)
    row = {"case": case["name"], "kernel": case["kernel"], "bytes": nbytes, "flops": flops}
    row["size"] = " x ".join(str(s) for s in np.asarray(args[0][1]).shape)
    kernel = manifest["kernels"][case["kernel"]]
    for compiler in COMPILERS:
        rel = kernel["cubins"].get(arch, {}).get(compiler)
        if rel is None:
            row[compiler] = _result("not built")
            continue
        try:
            got, ms = dev.run((payload / rel).read_bytes(), args, grid, repeat, expected)
        except RunnerError as e:
            row[compiler] = _result("error", detail=str(e))
            continue
        bad = compare_large(got, expected, rtol, atol)
        row[compiler] = _result("mismatch" if bad else "ok", ms, "; ".join(bad))
    return row


def _signature_key(sig) -> str:
    return json.dumps([sig.calling_convention.name] + [repr(p) for p in sig.parameters])


def install_recorded_compile(payload: Path, info: dict, arch: str, state: dict):
    """Replace ``cuda.tile``'s ``kernel._compile`` (what the launcher calls on a cache miss)
    by a lookup of the cubin recorded for ``state["compiler"]`` and the signature; every
    signature asked for is appended to ``state["seen"]``. Returns the original."""
    from cuda.tile._execution import kernel as kernel_cls

    original = kernel_cls._compile

    def recorded_compile(self, signature, context, compute_capability=None):
        key = _signature_key(signature)
        state["seen"].append(key)
        for name, case in info["cases"].items():
            # the case being run where known (a num_ctas=2 form shares its Python function)
            if name != state.get("case", name) or (
                "case" not in state and case["kernel"] != self._pyfunc.__name__
            ):
                continue
            for variant in [case] + case.get("alternatives", []):
                rel = variant["cubins"].get(arch, {}).get(state["compiler"])
                if variant["key"] == key and rel:
                    state.setdefault("variants", []).append(variant.get("variant", "launcher"))
                    return (payload / rel).read_bytes(), variant["symbol"], None, ()
        raise RunnerError(f"no recorded {state['compiler']} cubin for signature {key}")

    kernel_cls._compile = recorded_compile
    return original


def run_cutile(payload: Path, manifest: dict, arch: str, repeat: int, dry: bool) -> dict:
    """ct.launch of the recorded cuTile cases with each compiler's cubin (see module doc)."""
    info = manifest.get("cutile") or {}
    if not info.get("cases"):
        return {"status": "skipped", "reason": info.get("reason", "no cuTile cases in payload")}
    missing = [
        (c, comp)
        for c, case in info["cases"].items()
        for comp in COMPILERS
        if case["cubins"].get(arch, {}).get(comp)
        and not (payload / case["cubins"][arch][comp]).is_file()
    ]
    if missing:
        return {"status": "error", "reason": f"recorded cubins missing: {missing[:3]}"}
    import importlib.util

    spec = importlib.util.spec_from_file_location("cutile_kernels", payload / info["kernels_py"])
    if dry:
        return {
            "status": "dry run",
            "reason": "cases and recorded cubins checked, nothing launched",
            "cases": [
                {
                    "case": c,
                    "kernel": case["kernel"],
                    **{
                        comp: (
                            _result("ok", 0.004)
                            if case["cubins"].get(arch, {}).get(comp)
                            else _result(
                                "not built",
                                detail=case.get("errors", {}).get(arch, {}).get(comp, ""),
                            )
                        )
                        for comp in COMPILERS
                    },
                }
                for c, case in info["cases"].items()
            ],
        }
    try:
        import torch

        import cuda.tile as ct
        from cuda.tile._execution import kernel as kernel_cls
    except ImportError as e:
        return {"status": "skipped", "reason": f"cannot import cuTile or torch: {e}"}
    if not torch.cuda.is_available():
        return {"status": "skipped", "reason": "torch sees no GPU"}
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernels = module.kernels()
    cases = {c.name: c for c in module.launch_cases()}
    state = {"compiler": None, "seen": []}
    original = install_recorded_compile(payload, info, arch, state)
    rows = []
    try:
        for name, case in sorted(info["cases"].items()):
            lc = cases[name]
            row = {"case": name, "kernel": case["kernel"]}
            for compiler in COMPILERS:
                state["compiler"] = compiler
                if not case["cubins"].get(arch, {}).get(compiler):
                    row[compiler] = _result(
                        "not built", detail=case.get("errors", {}).get(arch, {}).get(compiler, "")
                    )
                    continue
                # a fresh dispatcher per compiler: cuTile caches kernels per dispatcher
                k = kernels[case["kernel"]].kernel.replace_hints()
                grid, args = lc.make(np.random.default_rng(0))
                before = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
                dev_args = tuple(
                    (
                        torch.from_numpy(np.ascontiguousarray(a)).cuda()
                        if isinstance(a, np.ndarray)
                        else a
                    )
                    for a in args
                )
                try:
                    ct.launch(torch.cuda.current_stream(), grid, k, dev_args)
                    torch.cuda.synchronize()
                    bad = []
                    for i, want in lc.expect(before).items():
                        got = dev_args[i].cpu().numpy()
                        if not np.allclose(got, want, rtol=lc.rtol, atol=lc.atol, equal_nan=True):
                            bad.append(
                                f"arg {i}: {int((~np.isclose(got, want, rtol=lc.rtol, atol=lc.atol)).sum())} element(s) differ"
                            )
                    times = []
                    for _ in range(repeat):
                        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                            enable_timing=True
                        )
                        s.record()
                        ct.launch(torch.cuda.current_stream(), grid, k, dev_args)
                        e.record()
                        e.synchronize()
                        times.append(s.elapsed_time(e))
                    ms = float(np.median(times)) if times else None
                    row[compiler] = _result("mismatch" if bad else "ok", ms, "; ".join(bad))
                except Exception as e:  # noqa: BLE001 - reported per case
                    row[compiler] = _result("error", detail=f"{type(e).__name__}: {e}"[:300])
                meta = cubin_kernel((payload / case["cubins"][arch][compiler]).read_bytes())
                if row[compiler]["status"] != "ok" and not meta["language"]:
                    row[compiler]["detail"] += (
                        " (the cubin has no EIATTR_LANGUAGE, as PTX `.language` gives: "
                        "cuTile launches with block (1,1,1) and leaves the block size to the driver)"
                    )
            rows.append(row)
    finally:
        kernel_cls._compile = original
    known = {v["key"] for c in info["cases"].values() for v in [c] + c.get("alternatives", [])}
    unpredicted = sorted(set(state["seen"]) - known)
    return {
        "status": "ran",
        "cases": rows,
        "unpredicted_signatures": unpredicted,
        "variants_used": sorted(set(state.get("variants", []))),
    }


# --- report -----------------------------------------------------------------------------------


def _us(r: dict) -> str:
    return f"{r['ms'] * 1e3:.1f}" if r.get("ms") else "-"


def _ratio(row: dict) -> float | None:
    a, b = row.get("tilegen", {}), row.get("tileiras", {})
    if a.get("status") == b.get("status") == "ok" and a.get("ms") and b.get("ms"):
        return a["ms"] / b["ms"]
    return None


def _cell(r: dict) -> str:
    s = r.get("status", "-")
    return {"ok": "yes", "mismatch": "**NO**", "error": "**error**"}.get(s, s)


def _notes(row: dict) -> str:
    notes = []
    for c in COMPILERS:
        r = row.get(c, {})
        if r.get("detail"):
            notes.append(f"{c}: {r['detail']}")
    if row.get("timing_error"):
        notes.append(f"timing: {row['timing_error']}")
    a, b = row.get("gpu_before") or {}, row.get("gpu_after") or {}
    for key, unit in (("sm_clock_mhz", "MHz"), ("temperature_c", "C"), ("power_w", "W")):
        if key in a and key in b:  # (NVML's view around the timed rounds)
            notes.append(f"{a[key]:.0f} -> {b[key]:.0f} {unit}")
    return "; ".join(notes).replace("|", "/").replace("\n", " ")[:300]


def _time_interleaved(fns: dict, sync, event, batches: int = 5, per_batch: int = 10) -> dict:
    """{name: median ms} of each of ``fns`` ({name: fn}): ``batches`` rounds, each timing one
    batch of ``per_batch`` back-to-back calls of every fn in turn between CUDA events, after a
    warm-up call of each. The rounds interleave the contenders, so a clock that drifts while
    the GPU heats (or any other change over the run) is spread over all of them alike instead
    of favouring whichever was timed first. Launches queue up, so the host's launch cost stays
    off the GPU's time once a launch takes longer than issuing one."""
    for fn in fns.values():
        fn()
    sync()
    times: dict = {name: [] for name in fns}
    for _ in range(batches):
        for name, fn in fns.items():
            s, e = event(), event()
            s.record()
            for _ in range(per_batch):
                fn()
            e.record()
            e.synchronize()
            times[name].append(s.elapsed_time(e) / per_batch)
    return {name: float(np.median(t)) for name, t in times.items()}


def _gpu_state() -> dict:
    """The SM clock (MHz), temperature (C) and power (W) now, where torch can read them (NVML);
    empty where it cannot."""
    import torch

    out = {}
    for key, read in (
        ("sm_clock_mhz", "clock_rate"),
        ("temperature_c", "temperature"),
        ("power_w", "power_draw"),
    ):
        try:
            v = getattr(torch.cuda, read)()
            out[key] = v / 1000 if key == "power_w" else v  # (power_draw: milliwatts)
        except Exception:  # noqa: BLE001 - NVML missing: the report says nothing
            pass
    return out


def perf_row(payload: Path, manifest: dict, arch: str, index: int) -> dict:
    """One throughput case (bench/gpu_perf_cases.py) through ``ct.launch``: each compiler's
    recorded cubin, checked against torch in f32 and timed; the library baseline beside. Runs
    in a worker process (``--worker perf:INDEX``): a kernel that faults costs its row only."""
    import torch

    import cuda.tile as ct
    from cuda.tile._execution import kernel as kernel_cls

    sys.path.insert(0, str(payload / "cutile"))
    import gpu_perf_cases as perf

    info = manifest["perf"]
    case = perf.cases()[index]
    rec = info["cases"][case.name]
    kernels = perf.kernels()
    state = {"compiler": None, "seen": [], "case": case.name}
    original = install_recorded_compile(payload, info, arch, state)
    sync = torch.cuda.synchronize

    def event():
        return torch.cuda.Event(enable_timing=True)

    row = {"case": case.name, "kernel": case.kernel, "flops": case.flops}
    try:
        args = perf.torch_args(case)
        want = perf.reference(case, args)
        out_i = perf.output_index(case)
        variants = [c for c in rec["cubins"].get(arch, {}) if c not in COMPILERS]
        launches = {}  # compiler -> its launch, each checked first (a fresh dispatcher each)
        for compiler in COMPILERS + tuple(variants):
            if not rec["cubins"].get(arch, {}).get(compiler):
                why = rec.get("errors", {}).get(arch, {}).get(compiler, "")
                row[compiler] = _result("not built", detail=why)
                continue
            state["compiler"] = compiler
            k = kernels[case.kernel].replace_hints()
            args[out_i].zero_()
            try:
                ct.launch(torch.cuda.current_stream(), case.grid, k, args)
                sync()
                err = float((args[out_i].float() - want).norm() / want.norm())
                bad = "" if err <= case.tol else f"relative error {err:.2e} > {case.tol}"
                row[compiler] = _result("mismatch" if bad else "ok", None, bad)
                row[compiler]["rel_err"] = err
                launches[compiler] = lambda k=k: ct.launch(
                    torch.cuda.current_stream(), case.grid, k, args
                )
            except Exception as e:  # noqa: BLE001 - reported per case
                row[compiler] = _result("error", detail=f"{type(e).__name__}: {e}"[:300])
        fn, what = perf.baseline(case, args)
        row["baseline_what"] = what
        if fn:
            launches["baseline"] = fn
        row["gpu_before"] = _gpu_state()
        try:  # every contender timed in the same rounds, side by side
            ms = _time_interleaved(launches, sync, event)
        except Exception as e:  # noqa: BLE001 - a fault while timing: the row says so
            ms = {}
            row["timing_error"] = f"{type(e).__name__}: {e}"[:300]
        row["gpu_after"] = _gpu_state()
        for compiler in launches.keys() - {"baseline"}:
            row[compiler]["ms"] = ms.get(compiler)
        row["baseline_ms"] = ms.get("baseline")
    finally:
        kernel_cls._compile = original
    return row


def _find_spec(util, name: str):
    try:
        return util.find_spec(name)
    except ImportError:  # a parent package that is missing
        return None


def run_perf(args, manifest: dict) -> dict:
    """Every throughput case, each in its own worker process."""
    info = manifest.get("perf") or {}
    if not info.get("cases"):
        return {"status": "skipped", "reason": info.get("reason", "no throughput cases")}
    if args.dry_run:
        return {"status": "dry run", "reason": "nothing launched", "cases": []}
    import importlib.util

    missing = [m for m in ("torch", "cuda.tile") if _find_spec(importlib.util, m) is None]
    if missing:
        return {"status": "skipped", "reason": f"not importable here: {', '.join(missing)}"}
    rows = []
    for i, name in enumerate(info["cases"]):
        if args.perf and not any(part in name for part in args.perf):
            continue
        fallback = {"case": name, "kernel": "", "flops": 0}
        rows.append(isolated(args, "perf", str(i), fallback, timeout=60))
        r = rows[-1]
        print(
            f"perf {name}: "
            + ", ".join(f"{c} {r[c]['status']} {r[c].get('ms')}" for c in COMPILERS)
            + f", library {r.get('baseline_ms')}",
            flush=True,
        )
    return {"status": "ran", "cases": rows}


def _perf_section(perf: dict) -> list[str]:
    out = ["", "## Throughput through cuTile (`ct.launch`, large inputs)", ""]
    if not perf.get("cases"):
        return out + [f"{perf.get('status', 'skipped')}: {perf.get('reason', '')}"]
    out += [
        "| case | tilegen correct | tileiras correct | tilegen TFLOP/s | tileiras TFLOP/s "
        "| tilegen/tileiras time | library TFLOP/s | tilegen % of library | library | notes |",
        "|---|---|---|---:|---:|---:|---:|---:|---|---|",
    ]

    def tf(ms, flops):
        return flops / (ms * 1e-3) / 1e12 if ms else None

    for r in perf["cases"]:
        # a rate only for a correct result
        t = {
            c: tf(r[c].get("ms"), r["flops"]) if r[c]["status"] == "ok" else None for c in COMPILERS
        }
        lib = tf(r.get("baseline_ms"), r["flops"])
        ratio = _ratio(r)
        out.append(
            f"| {r['case']} | {_cell(r['tilegen'])} | {_cell(r['tileiras'])} "
            + "".join(f"| {t[c]:.0f} " if t[c] else "| - " for c in COMPILERS)
            + f"| {f'{ratio:.2f}' if ratio else '-'} "
            + (f"| {lib:.0f} " if lib else "| - ")
            + (f"| {100 * t['tilegen'] / lib:.0f}% " if lib and t["tilegen"] else "| - ")
            + f"| {r.get('baseline_what', '')} | {_notes(r)} |"
        )
    extra = [
        (r, c)
        for r in perf["cases"]
        for c in r
        if c.startswith("tilegen ") and isinstance(r[c], dict) and "status" in r[c]
    ]
    if extra:
        out += ["", "tilegen built with other options (same launch, same inputs):", ""]
        out += ["| case | build | correct | TFLOP/s | time / default tilegen build |"]
        out += ["|---|---|---|---:|---:|"]
        for r, c in extra:
            ms, base = r[c].get("ms"), r["tilegen"].get("ms")
            rate = tf(ms, r["flops"]) if r[c]["status"] == "ok" else None
            out.append(
                f"| {r['case']} | {c[len('tilegen '):]} | {_cell(r[c])} "
                + (f"| {rate:.0f} " if rate else "| - ")
                + (f"| {ms / base:.2f} |" if ms and base else "| - |")
            )
    return out


def render_report(res: dict) -> str:
    """The Markdown report of a run (``results.json``'s content)."""
    dev, peaks, m = res["device"], res["peaks"], res["manifest"]
    out = [f"# tilegen on {dev['name']} ({res['arch']})", ""]
    out += [
        f"- run: {res['date']}; {res['elapsed_s']:.0f} s; median of {res['repeat']} launches "
        "between CUDA events after a warm-up launch",
        f"- payload: built {m['built']} from tilegen commit `{m['commit']}` "
        f"(tileiras: {m['tileiras_version']}); cubins for {', '.join(m['archs'])}",
        f"- device: {dev['name']}, sm_{dev['sm']}, {dev['sms']} SMs, driver API {dev['driver_api']}",
        f"- measured peaks: device-to-device copy {peaks['copy_gbs']:.0f} GB/s (read + write); "
        + (
            f"cuBLAS f16 matmul {peaks['matmul_tflops']:.0f} TFLOP/s at {peaks['matmul_size']}^3 "
            f"({peaks['matmul_what']})"
            if peaks.get("matmul_tflops")
            else f"cuBLAS matmul: not measured ({peaks.get('matmul_what')})"
        ),
    ]
    corpus = res["corpus"]
    n = len(corpus)
    ok = {c: sum(r[c]["status"] == "ok" for r in corpus) for c in COMPILERS}
    slower = [r["kernel"] for r in corpus if (_ratio(r) or 0) > SLOWER]
    ratios = [x for x in (_ratio(r) for r in corpus) if x]
    out += ["", "## Summary", ""]
    out += [
        f"- corpus kernels correct on hardware: tilegen {ok['tilegen']}/{n}, "
        f"tileiras {ok['tileiras']}/{n}",
        f"- time tilegen/tileiras over the {len(ratios)} kernels both ran: median "
        + (f"{float(np.median(ratios)):.2f}" if ratios else "-")
        + f"; slower than tileiras (ratio > {SLOWER}): "
        + (", ".join(slower) if slower else "none"),
    ]
    for r in res["large"]:
        if r["kernel"] == "vec_add" and r["tilegen"].get("ms"):
            pct = 100 * r["bytes"] / (r["tilegen"]["ms"] * 1e-3) / 1e9 / peaks["copy_gbs"]
            out.append(
                f"- vec_add bandwidth: {pct:.0f}% of the copy bandwidth "
                f"(goal >= 90%: {'met' if pct >= 90 else 'NOT met'})"
            )
    cut = res["cutile"]
    if cut.get("cases"):
        cok = {c: sum(r[c]["status"] == "ok" for r in cut["cases"]) for c in COMPILERS}
        out.append(
            f"- through cuTile (ct.launch, {cut['status']}): tilegen {cok['tilegen']}/"
            f"{len(cut['cases'])} correct, tileiras {cok['tileiras']}/{len(cut['cases'])}"
        )
    else:
        out.append(f"- through cuTile: {cut['status']} ({cut.get('reason', '')})")

    out += ["", "## Corpus kernels (corpus inputs)", ""]
    out += [
        "| kernel | tilegen correct | tileiras correct | tilegen µs | tileiras µs "
        "| tilegen/tileiras | notes |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for r in corpus:
        ratio = _ratio(r)
        out.append(
            f"| {r['kernel']} | {_cell(r['tilegen'])} | {_cell(r['tileiras'])} "
            f"| {_us(r['tilegen'])} | {_us(r['tileiras'])} "
            f"| {f'{ratio:.2f}' if ratio else '-'} | {_notes(r)} |"
        )

    out += ["", "## Bandwidth and throughput (large inputs)", ""]
    out += [
        "| case | size | tilegen correct | tileiras correct | tilegen µs | tileiras µs "
        "| tilegen/tileiras | tilegen | tileiras |",
        "|---|---|---|---|---:|---:|---:|---|---|",
    ]
    for r in res["large"]:
        rates = []
        for c in COMPILERS:
            ms = r[c].get("ms")
            if not ms:
                rates.append("-")
            elif r["flops"]:
                tf = r["flops"] / (ms * 1e-3) / 1e12
                ref = peaks.get("large_matmul_tflops") or peaks.get("matmul_tflops")
                rates.append(
                    f"{tf:.1f} TFLOP/s" + (f" ({100 * tf / ref:.0f}% of cuBLAS)" if ref else "")
                )
            else:
                gbs = r["bytes"] / (ms * 1e-3) / 1e9
                rates.append(f"{gbs:.0f} GB/s ({100 * gbs / peaks['copy_gbs']:.0f}% of copy)")
        ratio = _ratio(r)
        out.append(
            f"| {r['case']} | {r['size']} | {_cell(r['tilegen'])} | {_cell(r['tileiras'])} "
            f"| {_us(r['tilegen'])} | {_us(r['tileiras'])} | {f'{ratio:.2f}' if ratio else '-'} "
            f"| {rates[0]} | {rates[1]} |"
        )

    out += ["", "## Through cuTile (`ct.launch`)", ""]
    if cut.get("cases"):
        out += [
            "| case | kernel | tilegen correct | tileiras correct | tilegen µs | tileiras µs "
            "| tilegen/tileiras | notes |",
            "|---|---|---|---|---:|---:|---:|---|",
        ]
        for r in cut["cases"]:
            ratio = _ratio(r)
            out.append(
                f"| {r['case']} | {r['kernel']} | {_cell(r['tilegen'])} | {_cell(r['tileiras'])} "
                f"| {_us(r['tilegen'])} | {_us(r['tileiras'])} "
                f"| {f'{ratio:.2f}' if ratio else '-'} | {_notes(r)} |"
            )
        if cut.get("variants_used"):
            out += [
                "",
                f"Recorded signature variants the launcher asked for: {cut['variants_used']}",
            ]
        if cut.get("unpredicted_signatures"):
            out += ["", "Signatures cuTile's launcher asked for that were not recorded:", ""]
            out += [f"- `{s}`" for s in cut["unpredicted_signatures"]]
    else:
        out.append(f"{cut['status']}: {cut.get('reason', '')}")
    if "perf" in res:
        out += _perf_section(res["perf"])
    return "\n".join(out) + "\n"


# --- driver -----------------------------------------------------------------------------------


def pick_arch(sm: int, archs: list[str]) -> str:
    """The payload arch for a device: its own, else the newest older one of the same major."""
    own = f"sm_{sm}"
    if own in archs:
        return own
    same_major = [a for a in archs if int(a[3:]) // 10 == sm // 10 and int(a[3:]) <= sm]
    if same_major:
        return max(same_major, key=lambda a: int(a[3:]))
    raise RunnerError(f"the payload has cubins for {', '.join(archs)}, not for sm_{sm}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("payload", type=Path)
    p.add_argument("--out", type=Path, help="where results.json and gpu_results.md go")
    p.add_argument("--repeat", type=int, default=20, help="timed launches (median)")
    p.add_argument("--kernel", action="append", help="only these corpus kernels")
    p.add_argument("--dry-run", action="store_true", help="no GPU: check the payload, fake times")
    p.add_argument("--device", type=int, default=0)
    p.add_argument(
        "--scale", type=float, default=1.0, help="shrink the large cases and the copy (tests)"
    )
    p.add_argument("--no-perf", action="store_true", help="leave out the throughput cases")
    p.add_argument(
        "--perf", action="append", help="only the throughput cases whose names contain this"
    )
    p.add_argument("--no-cutile", action="store_true", help="leave out the ct.launch cases")
    p.add_argument("--worker", help=argparse.SUPPRESS)  # corpus:NAME or large:INDEX (one row)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    manifest = json.loads((args.payload / "manifest.json").read_text())
    try:
        dev = FakeDriver() if args.dry_run else Driver(args.device)
        arch = pick_arch(dev.info["sm"], manifest["archs"])
    except RunnerError as e:
        print(f"gpu_runner: error: {e}", file=sys.stderr)
        return 1
    if args.worker:
        part, item = args.worker.split(":", 1)
        try:
            if part == "corpus":
                row = corpus_row(dev, args.payload, manifest, arch, args.repeat, item)
            elif part == "perf":
                row = perf_row(args.payload, manifest, arch, int(item))
            else:
                row = large_row(
                    dev, args.payload, manifest, arch, args.repeat, args.scale, int(item)
                )
        except RunnerError as e:
            row = {c: _result("error", detail=str(e)) for c in COMPILERS}
        print(json.dumps(row, default=str))
        return 0
    print(f"device: {dev.info}; payload arch {arch}", flush=True)
    peaks = {"copy_gbs": dev.copy_gbs(max(1 << 20, int((1 << 30) * args.scale)))}
    size = manifest.get("matmul_peak_size", 8192)
    peaks["matmul_tflops"], peaks["matmul_what"] = torch_matmul_tflops(size, 10, args.dry_run)
    peaks["matmul_size"] = size
    mm = [c for c in manifest["large"] if c["kind"] == "matmul"]
    if mm and not args.dry_run:
        peaks["large_matmul_tflops"] = torch_matmul_tflops(mm[0]["size"], 10, False)[0]
    print(f"peaks: {peaks}", flush=True)
    res = {
        "device": dev.info,
        "arch": arch,
        "repeat": args.repeat,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "host": platform.node(),
        "manifest": {k: manifest[k] for k in ("built", "commit", "tileiras_version", "archs")},
        "peaks": peaks,
    }
    names = [n for n in sorted(manifest["kernels"]) if not args.kernel or n in args.kernel]
    if args.dry_run:  # in process: nothing can fault
        res["corpus"] = [corpus_row(dev, args.payload, manifest, arch, 0, n) for n in names]
        res["large"] = [
            large_row(dev, args.payload, manifest, arch, 0, min(args.scale, 1e-3), i)
            for i in range(len(manifest["large"]))
        ]
    else:
        del dev  # each row runs in its own process; this one keeps no context busy
        res["corpus"] = []
        for n in names:
            res["corpus"].append(isolated(args, "corpus", n, {"kernel": n}))
            print(f"corpus {n}: {[res['corpus'][-1][c]['status'] for c in COMPILERS]}", flush=True)
        res["large"] = []
        for i, case in enumerate(manifest["large"]):
            fallback = {"case": case["name"], "kernel": case["kernel"], "bytes": 0, "flops": None}
            res["large"].append(isolated(args, "large", str(i), {**fallback, "size": "-"}))
            print(f"large {case['name']}: {[res['large'][-1][c]['status'] for c in COMPILERS]}")
    if args.no_cutile:
        res["cutile"] = {"status": "skipped", "reason": "--no-cutile"}
    else:
        res["cutile"] = run_cutile(args.payload, manifest, arch, args.repeat, args.dry_run)
    if not args.no_perf:
        res["perf"] = run_perf(args, manifest)
    res["elapsed_s"] = time.perf_counter() - t0
    out = args.out or args.payload / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(res, indent=1, default=str))  # before the report
    report = render_report(res)
    (out / "gpu_results.md").write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
