"""``tilegen run --backend cuda``: compile a kernel to a cubin (runtime/codegen PTX + ptxas) and
launch it on a real GPU through cuda-python (``cuda.bindings.driver``).

The cuTile calling convention is the simulator's (runtime/ptx/launch.py): every array argument
becomes (pointer, shape per dim, stride per dim in elements), every scalar one param; the PTX
entry's ``.param`` types say how wide each is. The CTA size is the entry's ``.reqntid``.

Without cuda-python, a CUDA driver or a device, :func:`run_cuda` raises ``RunError`` with one
diagnostic saying which (``tilegen run`` prints it as one line, no traceback).
"""

from __future__ import annotations

import ctypes
import re
from typing import Optional

import numpy as np

from tilegen.runtime.diagnostics import Diagnostic
from tilegen.runtime.interp.api import RunError

_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\((.*?)\)", re.S)
_PARAM = re.compile(r"\.param\s+\.(\w+)\s+(?:\.align\s+\d+\s+)?([\w$]+)(\[\d+\])?")
_NTID = re.compile(r"\.(?:reqntid|maxntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")


def _error(message: str) -> RunError:
    return RunError([Diagnostic("error", message)])


def ptx_entry(ptx: str) -> tuple[str, list[str], tuple[int, int, int]]:
    """(entry name, PTX type per param, block dims) of the only ``.entry`` in ``ptx``."""
    entries = list(_ENTRY.finditer(ptx))
    if len(entries) != 1:
        raise _error(f"expected one .entry in the PTX, found {len(entries)}")
    m = entries[0]
    types = []
    for p in _PARAM.finditer(m.group(2)):
        if p.group(3):
            raise _error(f"param {p.group(2)} is an array ({p.group(1)}{p.group(3)}): unsupported")
        types.append(p.group(1))
    nt = _NTID.search(ptx, m.end())
    if nt is None:
        raise _error(f"entry {m.group(1)}: no .reqntid/.maxntid; block size unknown")
    block = tuple(int(g or 1) for g in nt.groups())
    return m.group(1), types, block


def pack_param(value, ptype: str) -> ctypes._SimpleCData:
    """A ctypes value holding ``value`` as the PTX param type ``ptype`` (u32, s64, f32, b64 ...)."""
    bits = int(re.sub(r"\D", "", ptype) or 64)
    if ptype.startswith("f"):
        return ctypes.c_float(float(value)) if bits == 32 else ctypes.c_double(float(value))
    raw = int(value) & ((1 << bits) - 1)
    return {8: ctypes.c_uint8, 16: ctypes.c_uint16, 32: ctypes.c_uint32, 64: ctypes.c_uint64}[bits](
        raw
    )


def flatten(args: list, device_ptrs: list[int]) -> list:
    """The flat cuTile param values for ``args``: arrays (with their device pointer, in order)
    as (ptr, shape..., strides...), scalars as themselves."""
    from tilegen.runtime.ptx.launch import flat_params

    it = iter(device_ptrs)
    return flat_params(args, lambda c: next(it))


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError:
        try:  # cuda-python < 12.6 spells it cuda.cuda
            from cuda import cuda as driver  # type: ignore
        except ImportError:
            raise _error(
                "--backend cuda needs cuda-python (pip install cuda-python), which is not installed"
            ) from None
    return driver


def _check(driver, result, what: str):
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        name = getattr(err, "name", str(err))
        raise _error(f"{what} failed: {name}")
    return rest[0] if len(rest) == 1 else tuple(rest)


def probe() -> tuple[int, str]:
    """(number of CUDA devices, why none when 0); never raises."""
    try:
        driver = _driver()
    except RunError as e:
        return 0, e.diagnostics[0].message
    try:
        _check(driver, driver.cuInit(0), "cuInit")
        n = int(_check(driver, driver.cuDeviceGetCount(), "cuDeviceGetCount"))
    except RunError as e:
        return 0, e.diagnostics[0].message
    except Exception as e:  # e.g. cuda.pathfinder: no libcuda.so (no NVIDIA driver)
        return 0, f"cuInit failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return n, "" if n else "no CUDA device is visible"


def device_count() -> int:
    """Number of CUDA devices (0 without cuda-python, a driver or a device); never raises."""
    return probe()[0]


def device_sm(ordinal: int = 0) -> int:
    """The compute capability (major*10 + minor) of device ``ordinal``."""
    driver = _driver()
    _check(driver, driver.cuInit(0), "cuInit")
    dev = _check(driver, driver.cuDeviceGet(ordinal), "cuDeviceGet")
    attr = driver.CUdevice_attribute
    major = _check(
        driver,
        driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
        "cuDeviceGetAttribute",
    )
    minor = _check(
        driver,
        driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
        "cuDeviceGetAttribute",
    )
    return 10 * int(major) + int(minor)


def launch_cubin(
    cubin: bytes,
    ptx: str,
    args: list,
    grid,
    ordinal: int = 0,
    repeat: int = 0,
) -> tuple[list[np.ndarray], Optional[float]]:
    """Launch ``cubin`` (built from ``ptx``, which gives the entry, its params and block size)
    over ``grid`` on device ``ordinal``; returns every array argument after the launch, in
    argument order, and (``repeat`` > 0) the median kernel time in ms over ``repeat`` further
    launches (cuEvent; these re-run on the already-updated outputs)."""
    driver = _driver()
    name, ptypes, block = ptx_entry(ptx)
    _check(driver, driver.cuInit(0), "cuInit")
    if int(_check(driver, driver.cuDeviceGetCount(), "cuDeviceGetCount")) <= ordinal:
        raise _error(f"no CUDA device {ordinal}")
    dev = _check(driver, driver.cuDeviceGet(ordinal), "cuDeviceGet")
    ctx = _check(driver, driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    allocations: list = []
    module = None
    try:
        _check(driver, driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        module = _check(driver, driver.cuModuleLoadData(cubin), "cuModuleLoadData")
        func = _check(
            driver, driver.cuModuleGetFunction(module, name.encode()), "cuModuleGetFunction"
        )
        hosts = []
        for a in args:
            a = np.asarray(a)
            if a.ndim == 0:
                continue
            c = np.ascontiguousarray(a)
            ptr = _check(driver, driver.cuMemAlloc(max(c.nbytes, 1)), "cuMemAlloc")
            allocations.append(ptr)
            if c.nbytes:
                _check(driver, driver.cuMemcpyHtoD(ptr, c, c.nbytes), "cuMemcpyHtoD")
            hosts.append(c)
        flat = flatten(args, [int(p) for p in allocations])
        if len(flat) != len(ptypes):
            raise _error(
                f"entry {name} has {len(ptypes)} params but the arguments flatten to {len(flat)}"
                " (hidden TMA tensor-map params are not supported by --backend cuda)"
            )
        values = [pack_param(v, t) for v, t in zip(flat, ptypes)]
        pointers = (ctypes.c_void_p * max(len(values), 1))(*[ctypes.addressof(v) for v in values])
        g = tuple((list(int(x) for x in grid) + [1, 1])[:3])

        def launch():
            _check(
                driver,
                driver.cuLaunchKernel(func, *g, *block, 0, 0, ctypes.addressof(pointers), 0),
                "cuLaunchKernel",
            )

        launch()
        _check(driver, driver.cuCtxSynchronize(), "cuCtxSynchronize (the kernel)")
        out = []
        for ptr, c in zip(allocations, hosts):
            host = np.empty_like(c)
            if c.nbytes:
                _check(driver, driver.cuMemcpyDtoH(host, ptr, c.nbytes), "cuMemcpyDtoH")
            out.append(host)
        ms = None
        if repeat > 0:
            start = _check(driver, driver.cuEventCreate(0), "cuEventCreate")
            stop = _check(driver, driver.cuEventCreate(0), "cuEventCreate")
            times = []
            for _ in range(repeat):
                _check(driver, driver.cuEventRecord(start, 0), "cuEventRecord")
                launch()
                _check(driver, driver.cuEventRecord(stop, 0), "cuEventRecord")
                _check(driver, driver.cuEventSynchronize(stop), "cuEventSynchronize")
                times.append(
                    float(_check(driver, driver.cuEventElapsedTime(start, stop), "elapsed"))
                )
            driver.cuEventDestroy(start)
            driver.cuEventDestroy(stop)
            ms = float(np.median(times))
        return out, ms
    finally:
        for ptr in allocations:
            driver.cuMemFree(ptr)
        if module is not None:
            driver.cuModuleUnload(module)
        driver.cuDevicePrimaryCtxRelease(dev)


def run_cuda(
    module, kernel_args, grid, gpu_name: Optional[str], verify: bool = True, options=None
) -> dict:
    """``tilegen run --backend cuda``: like runtime/ptxsim.run_ptxsim, on a GPU.
    ``gpu_name`` None targets the device's own architecture; ``options``
    (runtime/options.CompileOptions) supply the rest."""
    from tilegen.runtime.ptxsim import compile_to_ptx
    from tilegen.runtime.options import parse_target
    from tilegen.runtime.ptxas import PtxasError, assemble

    driver = _driver()  # fail early, before compiling, when cuda-python is missing
    del driver
    count, why = probe()
    if count == 0:
        raise _error(f"--backend cuda: no CUDA device ({why})")
    if gpu_name is None:
        gpu_name = f"sm_{device_sm()}"
    ptx = compile_to_ptx(module, gpu_name, verify, options)
    try:
        cubin, _log = assemble(ptx, parse_target(gpu_name).sm)
    except PtxasError as e:
        raise _error(str(e).splitlines()[-1] if str(e) else "ptxas failed") from None
    values = [np.asarray(a) for _, a in kernel_args]
    arrays, _ms = launch_cubin(cubin, ptx, values, grid)
    it = iter(arrays)
    return {name: (next(it) if v.ndim else v) for (name, _), v in zip(kernel_args, values)}


__all__ = ["device_count", "probe", "device_sm", "flatten", "launch_cubin", "ptx_entry", "run_cuda"]
