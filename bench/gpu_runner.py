"""Launch corpus cubins on a GPU, check their results and time them. Needs numpy and cuda-python
only (no tilegen), so it can be copied to any GPU machine.

``python gpu_runner.py DIR [--repeat N] [--kernel NAME ...] [--vec-add-n N]``

DIR holds cubins and the corpus npz files: ``<k>.npz`` (``grid``, ``arg__<param>`` in kernel
parameter order, ``expected__<param>``) and any number of cubins named ``<k>.<anything>.cubin``
(e.g. ``vec_add.sm_90.tilegen.cubin`` and ``vec_add.sm_90.tileiras.cubin``, as
``bench/codegen_vs_tileiras.py --keep DIR`` writes them, with the npz files). Each cubin must hold
one kernel; its parameter sizes come from ``EIATTR_KPARAM_INFO`` and its block size from
``EIATTR_REQNTID`` in ``.nv.info`` (no PTX needed). Arguments follow the cuTile calling
convention: every array becomes (pointer, shape per dim, stride per dim in elements), every
scalar one param. Cubins with extra 128-byte params (tileiras's TMA tensor maps) are reported
and skipped.

Per cubin it prints: match (``expected__`` arrays within --rtol/--atol, default 1e-5/1e-6),
median kernel time over --repeat launches (cuEvent) and effective bandwidth (bytes of every
array argument once / time) -- meaningful for the streaming kernels (vec_add, softmax,
layernorm) at sizes bigger than the corpus's; ``--vec-add-n N`` reruns vec_add cubins on N
random elements (grid = ceil(N / TILE), TILE from the ``_I<TILE>`` symbol suffix).
"""

from __future__ import annotations

import argparse
import ctypes
import math
import re
import struct
import sys
from pathlib import Path

import numpy as np

EIATTR_REQNTID = 0x10
EIATTR_MAX_THREADS = 0x05
EIATTR_KPARAM_INFO = 0x17
EIATTR_KPARAM_INFO_V2 = 0x45


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


def cubin_kernel(data: bytes) -> tuple[str, list[int], tuple[int, int, int]]:
    """(kernel name, param sizes in ordinal order, block dims) of a one-kernel cubin."""
    secs = _sections(data)
    names = [n[len(".text.") :] for n in secs if n.startswith(".text.")]
    if len(names) != 1:
        raise RunnerError(f"expected one kernel, found {names}")
    name = names[0]
    params: dict[int, int] = {}
    block = None
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
    if block is None:
        raise RunnerError(f"{name}: no REQNTID/MAX_THREADS; block size unknown")
    return name, [params[i] for i in sorted(params)], block


# --- arguments --------------------------------------------------------------------------------


def load_npz(path: Path):
    with np.load(path) as d:
        args = [(k[len("arg__") :], d[k]) for k in d.files if k.startswith("arg__")]
        expected = {k[len("expected__") :]: d[k] for k in d.files if k.startswith("expected__")}
        grid = tuple(int(x) for x in d["grid"].reshape(-1)) if "grid" in d.files else (1, 1, 1)
    return args, expected, grid


def flat_params(args, ptrs) -> list:
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
                bad.append(f"{name}: {int((~ok).sum())} element(s) differ")
        elif not np.array_equal(g, want):
            bad.append(f"{name}: {int((g != want).sum())} element(s) differ")
    return bad


# --- CUDA -------------------------------------------------------------------------------------


class Cuda:
    def __init__(self, ordinal: int = 0):
        try:
            from cuda.bindings import driver
        except ImportError:
            try:
                from cuda import cuda as driver  # type: ignore
            except ImportError:
                raise RunnerError("cuda-python is not installed (pip install cuda-python)")
        self.d = driver
        self.check(driver.cuInit(0), "cuInit")
        if self.check(driver.cuDeviceGetCount(), "cuDeviceGetCount") <= ordinal:
            raise RunnerError(f"no CUDA device {ordinal}")
        self.dev = self.check(driver.cuDeviceGet(ordinal), "cuDeviceGet")
        self.ctx = self.check(driver.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        self.check(driver.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        attr = driver.CUdevice_attribute
        major = self.check(
            driver.cuDeviceGetAttribute(
                attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.dev
            ),
            "attr",
        )
        minor = self.check(
            driver.cuDeviceGetAttribute(
                attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.dev
            ),
            "attr",
        )
        self.sm = 10 * int(major) + int(minor)

    def check(self, result, what: str):
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != self.d.CUresult.CUDA_SUCCESS:
            raise RunnerError(f"{what} failed: {getattr(err, 'name', err)}")
        return rest[0] if len(rest) == 1 else tuple(rest)

    def run(self, cubin: bytes, args, grid, repeat: int):
        """(arrays after one launch, by name; median ms over ``repeat`` more launches)."""
        d = self.d
        name, sizes, block = cubin_kernel(cubin)
        module = self.check(d.cuModuleLoadData(cubin), "cuModuleLoadData")
        ptrs, hosts = [], []
        try:
            func = self.check(d.cuModuleGetFunction(module, name.encode()), "cuModuleGetFunction")
            for arg_name, a in args:
                a = np.asarray(a)
                if a.ndim == 0:
                    continue
                c = np.ascontiguousarray(a)
                ptr = self.check(d.cuMemAlloc(max(c.nbytes, 1)), "cuMemAlloc")
                ptrs.append(ptr)
                if c.nbytes:
                    self.check(d.cuMemcpyHtoD(ptr, c, c.nbytes), "cuMemcpyHtoD")
                hosts.append((arg_name, c))
            flat = flat_params(
                [(n, np.ascontiguousarray(a)) for n, a in args], [int(p) for p in ptrs]
            )
            if len(flat) != len(sizes):
                extra = sizes[len(flat) :]
                why = " (TMA tensor maps)" if extra and set(extra) == {128} else ""
                raise RunnerError(
                    f"{name}: {len(sizes)} params, arguments flatten to {len(flat)}{why}"
                )
            values = [pack(v, s) for v, s in zip(flat, sizes)]
            pointers = (ctypes.c_void_p * max(1, len(values)))(
                *[ctypes.addressof(v) for v in values]
            )
            g = tuple((list(grid) + [1, 1])[:3])

            def launch():
                self.check(
                    d.cuLaunchKernel(func, *g, *block, 0, 0, ctypes.addressof(pointers), 0),
                    "cuLaunchKernel",
                )

            launch()
            self.check(d.cuCtxSynchronize(), "kernel")
            out = {}
            for ptr, (arg_name, c) in zip(ptrs, hosts):
                host = np.empty_like(c)
                if c.nbytes:
                    self.check(d.cuMemcpyDtoH(host, ptr, c.nbytes), "cuMemcpyDtoH")
                out[arg_name] = host
            ms = None
            if repeat > 0:
                start = self.check(d.cuEventCreate(0), "cuEventCreate")
                stop = self.check(d.cuEventCreate(0), "cuEventCreate")
                launch()  # warm-up
                times = []
                for _ in range(repeat):
                    self.check(d.cuEventRecord(start, 0), "cuEventRecord")
                    launch()
                    self.check(d.cuEventRecord(stop, 0), "cuEventRecord")
                    self.check(d.cuEventSynchronize(stop), "cuEventSynchronize")
                    times.append(float(self.check(d.cuEventElapsedTime(start, stop), "elapsed")))
                d.cuEventDestroy(start)
                d.cuEventDestroy(stop)
                ms = float(np.median(times))
            return out, ms
        finally:
            for ptr in ptrs:
                d.cuMemFree(ptr)
            d.cuModuleUnload(module)


# --- driver -----------------------------------------------------------------------------------


def vec_add_case(symbol: str, n: int, seed: int = 0):
    m = re.search(r"_I(\d+)$", symbol)
    tile = int(m.group(1)) if m else 256
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    args = [("a", a), ("b", b), ("c", np.zeros(n, np.float32))]
    return args, {"c": a + b}, (math.ceil(n / tile), 1, 1)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", type=Path)
    p.add_argument("--kernel", action="append", help="only these kernels (npz stem)")
    p.add_argument("--repeat", type=int, default=20, help="timed launches (median)")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--atol", type=float, default=1e-6)
    p.add_argument("--vec-add-n", type=int, metavar="N", help="also time vec_add on N elements")
    p.add_argument("--device", type=int, default=0)
    args = p.parse_args(argv)
    try:
        cuda = Cuda(args.device)
    except RunnerError as e:
        print(f"gpu_runner: error: {e}", file=sys.stderr)
        return 1
    print(f"device {args.device}: sm_{cuda.sm}")
    print(f"{'cubin':48s} {'result':10s} {'time us':>9s} {'GB/s':>8s}")
    failures = 0
    for cubin_path in sorted(args.dir.glob("*.cubin")):
        kernel = cubin_path.name.split(".")[0]
        if args.kernel and kernel not in args.kernel:
            continue
        npz = args.dir / f"{kernel}.npz"
        if not npz.exists():
            print(f"{cubin_path.name:48s} no {npz.name}")
            continue
        cubin = cubin_path.read_bytes()
        cases = [("", *load_npz(npz))]
        if args.vec_add_n and kernel == "vec_add":
            cases.append(
                (f" n={args.vec_add_n}", *vec_add_case(cubin_kernel(cubin)[0], args.vec_add_n))
            )
        for label, kargs, expected, grid in cases:
            try:
                got, ms = cuda.run(cubin, kargs, grid, args.repeat)
            except RunnerError as e:
                failures += 1
                print(f"{cubin_path.name + label:48s} error: {e}")
                continue
            bad = compare(got, expected, args.rtol, args.atol)
            failures += bool(bad)
            nbytes = sum(np.asarray(a).nbytes for _, a in kargs if np.asarray(a).ndim)
            gbs = f"{nbytes / (ms * 1e-3) / 1e9:8.1f}" if ms else "-"
            us = f"{ms * 1e3:9.1f}" if ms else "-"
            print(
                f"{cubin_path.name + label:48s} {'match' if not bad else 'MISMATCH':10s} {us} {gbs}"
                + (f"  {bad[0]}" if bad else "")
            )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
