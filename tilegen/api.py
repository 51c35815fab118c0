"""In-process compiler API: ``tilegen.compile(bytecode_or_text, gpu_name="sm_90")``.

One call runs the driver's whole pipeline (runtime/driver.py: read, verify, optimize, convert,
layouts, ptx, ptxas) in this process; the only subprocess is ``ptxas``. It returns a
:class:`CompileResult` or raises :class:`CompileError` (runtime/diagnostics.py, the one error
type of a compile) whose ``diagnostics`` are located where the input has locations and whose
``exit_code`` is the one NVIDIA's ``tileiras`` uses for the same kind of failure (1 bad argument
or unreadable path, 2 bad configuration, 3 unreadable or invalid input, 5 compile failure). Any
bad argument is a CompileError, never a TypeError.

Compiled kernels are cached on disk (tilegen/cache.py: ``$TILEGEN_CACHE_DIR``, default
``~/.cache/tilegen``), keyed like cuTile Python's cubin cache over the compiler version
(:func:`compiler_version`, which fingerprints tilegen's own sources), the ptxas version, every
compile option, and the input bytes; entries are checksummed. ``cache=False`` bypasses it.
"""

from __future__ import annotations

import os
import time
from typing import Optional, Union

from tilegen.runtime.diagnostics import (
    EXIT_COMPILE,
    EXIT_CONFIG,
    EXIT_INPUT,
    EXIT_USAGE,
    CompileError,
    Diagnostic,
)
from tilegen.runtime.options import (  # noqa: F401 - re-exported
    DEFAULT_OPT_LEVEL,
    GPU_NAMES,
    OPT_LEVELS,
    TARGET_NAMES,
    CompileOptions,
)
from tilegen.runtime.records import dataclass, field  # dataclasses' semantics, no import cost

Source = Union[bytes, bytearray, memoryview, str, os.PathLike]

#: names re-exported from tilegen/cache.py and tilegen/version.py, imported on first use (a
#: ``tilegen-tileiras`` compile with the cache off needs neither)
_LAZY = {
    "cache_dir": "tilegen.cache",
    "cache_key": "tilegen.cache",
    "build_fingerprint": "tilegen.version",
    "compiler_version": "tilegen.version",
    "newest_bytecode_version": "tilegen.version",
    "readable_bytecode_versions": "tilegen.version",
    "tilegen_version": "tilegen.version",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tilegen.api' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


@dataclass
class CompileResult:
    """A compiled module: ``cubin`` (bytes), ``ptx`` (text), ``diagnostics`` (non-error
    diagnostics, e.g. ptxas warnings), ``timings`` (stage -> seconds, in pipeline order:
    ``read``, ``verify``, ``pass:<name>``, ``verify:<stage>``, ``ptx``, ``ptxas``, ``total``;
    ``cache`` when the cache is on)."""

    ptx: str
    cubin: bytes
    gpu_name: str
    opt_level: int
    diagnostics: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    cache_key: Optional[str] = None
    cache_hit: bool = False
    ok: bool = True
    options: Optional[CompileOptions] = None


def format_diagnostic(d, prog: str = "tilegen") -> str:
    """The one diagnostic format (runtime/diagnostics.py): ``FILE:LINE:COL: error: msg``,
    ``FILE: error: msg (at byte offset N)``, ``FILE: error: msg`` or ``error: msg``."""
    return d.format()


# ----------------------------------------------------------------------------- compile


def _bool_arg(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise CompileError(
            [Diagnostic("error", f"{name} must be True or False, got {value!r:.40}")],
            EXIT_USAGE,
            "options",
        )
    return value


def compile(  # noqa: A001 - the public name
    source: Source,
    gpu_name: str = "sm_90",
    opt_level: int = DEFAULT_OPT_LEVEL,
    *,
    lineinfo: bool = False,
    device_debug: bool = False,
    sanitize: Optional[str] = None,
    options: Optional[CompileOptions] = None,
    cache: bool = True,
    name: Optional[str] = None,
) -> CompileResult:
    """Compile a Tile IR module to PTX and a cubin for ``gpu_name``.

    ``source``: bytecode (``bytes``), MLIR text (``str``, or bytes that are not bytecode), or a
    path (``pathlib.Path`` / ``os.PathLike``; regular files only). ``gpu_name``: a name
    ``tileiras --gpu-name`` takes, or its ``a``/``f`` variant (:data:`TARGET_NAMES`).
    ``opt_level``: 0-3 (default 3, as tileiras). ``options``: a full
    :class:`~tilegen.runtime.options.CompileOptions` (then ``gpu_name``, ``opt_level`` and the
    flags are not used). ``name``: the file name diagnostics use. Raises :class:`CompileError`
    on any failure, bad arguments included (never returns a failed result). ``lineinfo``
    (``.file``/``.loc``), ``device_debug`` (DWARF, at ``opt_level=0``) and
    ``sanitize="memcheck"`` (bounds checks) are described in docs/debugging.md.
    """
    t_total = time.perf_counter()
    timings: dict[str, float] = {}
    cache = _bool_arg("cache", cache)
    if options is None:
        options = CompileOptions(
            target=gpu_name,
            opt_level=opt_level,
            lineinfo=lineinfo,
            device_debug=device_debug,
            sanitize=sanitize,
        )
    elif not isinstance(options, CompileOptions):
        raise CompileError(
            [Diagnostic("error", f"options must be CompileOptions, got {type(options).__name__}")],
            EXIT_USAGE,
            "options",
        )
    from tilegen.runtime import driver

    if options.target is None:
        message = f"no GPU architecture given: pass gpu_name (one of {', '.join(GPU_NAMES)})"
        raise CompileError([Diagnostic("error", message)], EXIT_CONFIG, "target")
    data, name = driver.source_bytes(source, name)

    key = directory = None
    if cache:
        from tilegen import cache as cache_mod
        from tilegen.version import compiler_version

        start = time.perf_counter()
        directory = cache_mod.cache_dir()
        key = cache_mod.key_for(options, data, compiler_version(), directory)
        hit = cache_mod.lookup(directory, key)
        timings["cache"] = time.perf_counter() - start
        if hit is not None:
            timings["total"] = time.perf_counter() - t_total
            return CompileResult(
                hit[0], hit[1], options.target.name, options.opt_level, [], timings, key, True,
                options=options,
            )  # fmt: skip

    from tilegen.runtime.limits import deep_stack  # deeply nested IR: runtime/limits.py

    c = deep_stack(driver.run_stages, driver.Compilation(options, name, data))
    timings.update(c.timings)
    if key is not None:
        from tilegen import cache as cache_mod

        start = time.perf_counter()
        cache_mod.store(directory, key, c.ptx, c.cubin)
        timings["cache"] += time.perf_counter() - start
    timings["total"] = time.perf_counter() - t_total
    diagnostics = _ptxas_warnings(c.ptxas_log, name)
    return CompileResult(
        c.ptx, c.cubin, options.target.name, options.opt_level, diagnostics, timings, key,
        options=options,
    )  # fmt: skip


def _ptxas_warnings(log: str, name: str) -> list:
    from tilegen.runtime.diagnostics import FileLoc

    return [
        Diagnostic("warning", f"ptxas: {line.strip()}", FileLoc(name))
        for line in (log or "").splitlines()
        if "warning" in line.lower()
    ]


__all__ = [
    "EXIT_COMPILE",
    "EXIT_CONFIG",
    "EXIT_INPUT",
    "EXIT_USAGE",
    "CompileError",
    "CompileOptions",
    "CompileResult",
    "DEFAULT_OPT_LEVEL",
    "GPU_NAMES",
    "OPT_LEVELS",
    "TARGET_NAMES",
    "cache_dir",
    "cache_key",
    "build_fingerprint",
    "compile",
    "compiler_version",
    "newest_bytecode_version",
    "readable_bytecode_versions",
    "tilegen_version",
]
