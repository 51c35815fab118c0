"""In-process compiler API: ``tilegen.compile(bytecode_or_text, gpu_name="sm_90")``.

One call runs the whole pipeline of ``tilegen compile --emit=cubin`` (read, verify, the stages of
:data:`tilegen.runtime.passes.pipelines.COMPILE_STAGES`, PTX emission) in this process; the only
subprocess is ``ptxas``. It returns a :class:`CompileResult` or raises a :class:`CompileError`
whose ``diagnostics`` are located where the input has locations and whose ``exit_code`` is the
one NVIDIA's ``tileiras`` uses for the same kind of failure (2 bad configuration, 3 unreadable or
invalid input, 5 compile failure).

Compiled kernels are cached on disk under ``$TILEGEN_CACHE_DIR`` (default ``~/.cache/tilegen``),
keyed like cuTile Python's cubin cache (``cutile_cache.cache_key``): SHA-256 over the compiler
version (:func:`compiler_version`, which fingerprints tilegen's own sources), the arch, the opt
level with the debug flags, and the input bytes. ``cache=False`` bypasses the cache.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from tilegen.targets import GPU_NAMES  # noqa: E402

OPT_LEVELS = (0, 1, 2, 3)

#: tileiras's exit codes (measured; see docs/tileiras_shim.md)
EXIT_USAGE = 1  # bad command line, unreadable input file
EXIT_CONFIG = 2  # missing/unsupported target, invalid opt level, -g above -O0, unwritable output
EXIT_INPUT = 3  # not Tile IR bytecode, truncated bytecode, input fails verification
EXIT_COMPILE = 5  # the compiler could not compile a valid module

_CACHE_VERSION = b"\x01"  # as cutile_cache._cache._CACHE_VERSION
_MAGIC = b"\x7fTileIR\x00"

Source = Union[bytes, bytearray, memoryview, str, os.PathLike]


class CompileError(Exception):
    """Compilation failed. ``diagnostics``: the errors (``Diagnostic`` objects, ``.format()``
    prints ``FILE:LINE:COL: error: ...``); ``exit_code``: tileiras's code for this failure;
    ``stage``: where it failed (``target``, ``read``, ``verify``, ``passes``, ``ptx``,
    ``ptxas``, ``internal``)."""

    def __init__(self, diagnostics, exit_code: int, stage: str):
        self.diagnostics = list(diagnostics)
        self.exit_code = exit_code
        self.stage = stage
        super().__init__("\n".join(format_diagnostic(d) for d in self.diagnostics))


@dataclass
class CompileResult:
    """A compiled module: ``cubin`` (bytes), ``ptx`` (text), ``diagnostics`` (non-error
    diagnostics, e.g. ptxas warnings), ``timings`` (stage -> seconds, in pipeline order)."""

    ptx: str
    cubin: bytes
    gpu_name: str
    opt_level: int
    diagnostics: list = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    cache_key: Optional[str] = None
    cache_hit: bool = False
    ok: bool = True


def format_diagnostic(d, prog: str = "tilegen") -> str:
    """``FILE:LINE:COL: error: msg`` when ``d`` is located, else ``error: msg`` (as tileiras)."""
    from tilegen.runtime.diagnostics import file_line_col

    if file_line_col(d.loc) is not None:
        return d.format()
    return f"{d.severity}: {d.message}"


def _error(message: str, loc=None):
    from tilegen.runtime.diagnostics import Diagnostic

    return Diagnostic("error", message, loc)


# ----------------------------------------------------------------------------- version / cache


def _source_roots() -> list[Path]:
    import importlib.util

    roots = [Path(__file__).resolve().parent]
    for pkg in ("tilegen.runtime", "tilegen.generated"):
        spec = importlib.util.find_spec(pkg)
        if spec is not None and spec.submodule_search_locations:
            roots += [Path(p) for p in spec.submodule_search_locations]
    return roots


_FINGERPRINT: Optional[str] = None


def build_fingerprint() -> str:
    """A short hash of tilegen's sources (path, size, mtime of every .py/.yaml/.json file), so
    a cache entry from an older tilegen is never reused after the compiler changes."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        import hashlib  # here, not at the top: ~3 ms of every tilegen-tileiras start-up

        h = hashlib.sha256()
        for root in _source_roots():
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for name in sorted(filenames):
                    if name.endswith((".py", ".yaml", ".json", ".mlir")):
                        p = os.path.join(dirpath, name)
                        st = os.stat(p)
                        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        _FINGERPRINT = h.hexdigest()[:16]
    return _FINGERPRINT


def tilegen_version() -> str:
    try:
        from importlib.metadata import version

        return version("tilegen")
    except Exception:  # noqa: BLE001 - not installed (source tree on sys.path)
        return "0+unknown"


def readable_bytecode_versions() -> list[str]:
    """The bytecode versions tilegen reads (``runtime.bytecode.layouts.PRODUCTION_READ_VERSIONS``
    computed from the generated table directly: importing the reader costs ~35 ms of start-up
    that ``--version`` / ``--list-versions`` do not need)."""
    import sys

    T = sys.modules.get("tilegen.generated.cuda_tile.bytecode_tables")
    if T is None:  # a pure data module: load it without the package (its __init__ costs ~28 ms)
        import importlib.util

        spec = importlib.util.find_spec("tilegen.generated")
        path = Path(list(spec.submodule_search_locations)[0]) / "cuda_tile" / "bytecode_tables.py"
        spec = importlib.util.spec_from_file_location("_tilegen_bytecode_tables", path)
        T = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(T)
    return [v for v in T.OPCODE_CEILINGS if v not in T.TEST_VERSIONS]


def newest_bytecode_version() -> str:
    return readable_bytecode_versions()[-1]


def compiler_version() -> str:
    """The ``--version`` text of ``tilegen-tileiras`` (also the cache key's compiler version).

    The ``Cuda compilation tools, release X.Y, VX.Y.0+tilegen.V`` line keeps the shape cuTile's
    cache tool parses (``cutile_cache._cli``); X.Y is the newest Tile IR bytecode tilegen reads,
    not an NVIDIA toolkit release."""
    tile = newest_bytecode_version()
    return (
        f"tileiras: tilegen {tilegen_version()}, an open CUDA Tile IR compiler "
        "(drop-in for NVIDIA tileiras)\n"
        f"Cuda compilation tools, release {tile}, V{tile}.0+tilegen.{tilegen_version()}\n"
        f"Build tilegen.{build_fingerprint()}\n"
    )


def cache_dir() -> Path:
    env = os.environ.get("TILEGEN_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "tilegen"


def cache_key(
    version: str,
    sm_arch: str,
    opt_level: int,
    data: bytes,
    device_debug: bool = False,
    lineinfo: bool = False,
) -> str:
    """cuTile's ``cutile_cache._cache.cache_key`` layout (no preview features, no linker
    inputs); ``lineinfo`` shares the flags word with ``device_debug`` (bit 9)."""

    def u32(x: int) -> bytes:
        return int.to_bytes(x, 4, byteorder="big", signed=False)

    import hashlib

    h = hashlib.sha256()
    h.update(_CACHE_VERSION)
    for field_bytes in (version.encode(), sm_arch.encode()):
        h.update(u32(len(field_bytes)))
        h.update(field_bytes)
    h.update(u32(opt_level | (int(device_debug) << 8) | (int(lineinfo) << 9)))
    h.update(u32(len(data)))
    h.update(data)
    h.update(u32(0))  # preview features
    h.update(u32(0))  # linker inputs
    return h.hexdigest()


def _cache_paths(directory: Path, key: str) -> tuple[Path, Path]:
    base = directory / key[:2] / key
    return base.with_suffix(".cubin"), base.with_suffix(".ptx")


def _cache_lookup(directory: Path, key: str) -> Optional[tuple[str, bytes]]:
    cubin_path, ptx_path = _cache_paths(directory, key)
    try:
        return ptx_path.read_text(), cubin_path.read_bytes()
    except (OSError, UnicodeDecodeError):
        return None


def _cache_store(directory: Path, key: str, ptx: str, cubin: bytes) -> None:
    import tempfile

    cubin_path, ptx_path = _cache_paths(directory, key)
    try:
        cubin_path.parent.mkdir(parents=True, exist_ok=True)
        # ptx first: a lookup needs both, the cubin's rename publishes the entry
        for path, payload in ((ptx_path, ptx.encode()), (cubin_path, cubin)):
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
            os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written is no cache, not an error


# ----------------------------------------------------------------------------- pipeline


def parse_gpu_name(gpu_name: str) -> int:
    """``sm_90`` -> 90; raises :class:`CompileError` (exit 2) for a name tileiras rejects."""
    if gpu_name not in GPU_NAMES:
        raise CompileError(
            [
                _error(
                    f"GPU architecture {gpu_name} is not supported by tilegen; "
                    f"supported: {', '.join(GPU_NAMES)}"
                )
            ],
            EXIT_CONFIG,
            "target",
        )
    return int(gpu_name[3:])


def machine_code(root, sm: int, cubin: bool = True, timings: Optional[dict] = None):
    """``(ptx, cubin or None)`` for a module at the ptx stage (``compile_module(...,
    "ptx", ...)``): the one place that drives runtime/codegen and ptxas, shared by ``tilegen
    compile --emit=ptx|cubin`` and :func:`compile`. Raises ``CodegenError`` / ``PtxasError``."""
    from tilegen.runtime.codegen import emit_ptx
    from tilegen.runtime.codegen.driver import assemble

    timings = {} if timings is None else timings
    start = time.perf_counter()
    ptx = emit_ptx(root, sm)
    timings["ptx"] = time.perf_counter() - start
    if not cubin:
        return ptx, None
    start = time.perf_counter()
    data = assemble(ptx, sm)[0]
    timings["ptxas"] = time.perf_counter() - start
    return ptx, data


def _as_bytes(source: Source) -> tuple[bytes, str]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        return data, "<bytecode>" if data.startswith(_MAGIC) else "<stdin>"
    if isinstance(source, str):
        return source.encode(), "<stdin>"
    path = os.fspath(source)
    try:
        return Path(path).read_bytes(), str(path)
    except OSError as e:
        raise CompileError(
            [_error(f"unable to read input file '{path}': {e.strerror or e}")], EXIT_USAGE, "read"
        ) from None


def compile(  # noqa: A001 - the public name the issue asks for
    source: Source,
    gpu_name: str = "sm_90",
    opt_level: int = 3,
    *,
    lineinfo: bool = False,
    device_debug: bool = False,
    cache: bool = True,
    name: Optional[str] = None,
) -> CompileResult:
    """Compile a Tile IR module to PTX and a cubin for ``gpu_name``.

    ``source``: bytecode (``bytes``), MLIR text (``str``, or bytes that are not bytecode), or a
    path (``pathlib.Path`` / ``os.PathLike``). ``name`` is the file name diagnostics use for
    bytecode without debug locations. Raises :class:`CompileError` on failure (never returns a
    failed result). ``lineinfo`` / ``device_debug`` are validated as tileiras does but emit no
    debug sections yet (docs/tileiras_shim.md).
    """
    timings: dict[str, float] = {}
    t_total = time.perf_counter()
    sm = parse_gpu_name(gpu_name)
    if opt_level not in OPT_LEVELS:
        raise CompileError(
            [_error(f"invalid optimization level: {opt_level}")], EXIT_CONFIG, "target"
        )
    if device_debug and opt_level != 0:
        raise CompileError(
            [
                _error(
                    "optimized debugging is currently not supported, change the optimization "
                    "level to 0 or disable full debug info"
                )
            ],
            EXIT_CONFIG,
            "target",
        )
    data, default_name = _as_bytes(source)
    name = name or default_name

    key = directory = None
    if cache:
        start = time.perf_counter()
        directory = cache_dir()
        key = cache_key(compiler_version(), gpu_name, opt_level, data, device_debug, lineinfo)
        hit = _cache_lookup(directory, key)
        timings["cache"] = time.perf_counter() - start
        if hit is not None:
            timings["total"] = time.perf_counter() - t_total
            return CompileResult(
                hit[0], hit[1], gpu_name, opt_level, [], timings, key, cache_hit=True
            )

    try:
        from tilegen.runtime.limits import deep_stack  # deeply nested IR: runtime/limits.py

        ptx, cubin, diagnostics = deep_stack(_run_pipeline, data, name, sm, opt_level, timings)
    except CompileError:
        raise
    except RecursionError:
        raise CompileError(
            [_error("internal compiler error: nesting too deep (RecursionError)")],
            EXIT_COMPILE,
            "internal",
        ) from None
    except Exception as e:  # noqa: BLE001 - a crash is reported as a diagnostic, not a traceback
        if os.environ.get("TILEGEN_TRACEBACK"):
            raise
        raise CompileError(
            [_error(f"internal compiler error: {type(e).__name__}: {e}")],
            EXIT_COMPILE,
            "internal",
        ) from e
    if key is not None:
        start = time.perf_counter()
        _cache_store(directory, key, ptx, cubin)
        timings["cache"] += time.perf_counter() - start
    timings["total"] = time.perf_counter() - t_total
    return CompileResult(ptx, cubin, gpu_name, opt_level, diagnostics, timings, key)


def _run_pipeline(data: bytes, name: str, sm: int, opt_level: int, timings: dict):
    from tilegen.commands.compile import _Fail, _verify, compile_module, load_source
    from tilegen.runtime.codegen import CodegenError
    from tilegen.runtime.codegen.driver import PtxasError
    from tilegen.runtime.diagnostics import DiagnosticError

    start = time.perf_counter()
    try:
        module = load_source(data, name)
    except DiagnosticError as e:
        raise CompileError(list(e.preceding) + [e.diag], EXIT_INPUT, "read") from None
    except _Fail as e:
        raise CompileError(e.diags, EXIT_INPUT, "read") from None
    except Exception as e:  # noqa: BLE001 - malformed input that crashes the reader
        if os.environ.get("TILEGEN_TRACEBACK"):
            raise
        message = f"input could not be read: {type(e).__name__}: {e}"
        raise CompileError([_error(f"{name}: {message}")], EXIT_INPUT, "read") from e
    timings["read"] = time.perf_counter() - start

    start = time.perf_counter()
    try:
        _verify(module, "input")
    except _Fail as e:
        raise CompileError(e.diags, EXIT_INPUT, "verify") from None
    timings["verify"] = time.perf_counter() - start

    passes: list[tuple[str, float]] = []
    start = time.perf_counter()
    try:
        root = compile_module(
            module,
            "ptx",
            str(sm),
            True,
            lambda pass_name, _root, seconds: passes.append((pass_name, seconds)),
            opt_level=opt_level,
        )
    except _Fail as e:
        raise CompileError(e.diags, EXIT_COMPILE, "passes") from None
    except DiagnosticError as e:
        raise CompileError(list(e.preceding) + [e.diag], EXIT_COMPILE, "passes") from None
    elapsed = time.perf_counter() - start
    for pass_name, seconds in passes:
        label = f"pass:{pass_name}"
        timings[label] = timings.get(label, 0.0) + seconds
    # compile_module verifies after each stage; what the passes did not use is that
    timings["verify:stages"] = max(0.0, elapsed - sum(s for _, s in passes))

    try:
        ptx, cubin = machine_code(root, sm, True, timings)
    except CodegenError as e:
        raise CompileError(e.diagnostics, EXIT_COMPILE, "ptx") from None
    except PtxasError as e:
        raise CompileError([_error(str(e))], EXIT_COMPILE, "ptxas") from None
    return ptx, cubin, []


__all__ = [
    "CompileError",
    "CompileResult",
    "GPU_NAMES",
    "cache_dir",
    "cache_key",
    "compile",
    "compiler_version",
    "machine_code",
]
