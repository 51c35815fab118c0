"""The one compile pipeline, bytes to cubin, as one table of stages (:data:`STAGES`).

========== =========================================== ====================== ==============
stage      what it does                                artifact               fails with
========== =========================================== ====================== ==============
read       bytecode or MLIR text -> ``cuda_tile``      module                 3 (input)
verify     the verifier on the input                   module                 3 (input)
optimize   ``tile-optimize-O<N>`` (N = ``opt_level``)  cuda_tile module       5 (compile)
convert    ``convert-cuda-tile-to-nv-tileaa``          nv_tileaa module       5
layouts    ``nv-tileas-assign-layouts``                module with layouts    5
async      the async-path rule (runtime/passes/        decisions (text)       5
           async_rule.py): TMA pipeline or not, why
ptx        runtime/codegen's PTX emitter               PTX text               5
ptxas      ptxas (the ``nvidia-cuda-nvcc`` wheel)      cubin bytes            5
========== =========================================== ====================== ==============

Every entry point goes through here: ``tilegen compile`` (``--emit`` names a stage, see
:data:`EMIT`), ``tilegen run`` (:func:`load`; ``--lower-to`` and ``--backend ptxsim|cuda`` run
the stages up to ``convert`` / ``ptx``), ``tilegen.compile`` and ``tilegen-tileiras``
(:func:`compile_source`), and the interpreter's and simulator's helpers in ``runtime/``.
Each stage takes the typed :class:`~tilegen.runtime.options.CompileOptions` (the pass stages
build their pass options from them); the pass stages verify their result when
``options.verify``. Failures are one :class:`~tilegen.runtime.diagnostics.CompileError` carrying
located diagnostics, tileiras's exit class and the stage. :class:`Compilation` keeps each
artifact and the time of every stage and pass; ``after_pass(name, root, seconds)`` is called
after every pass.

Nothing here is imported at module level beyond the options and diagnostics, so importing the
driver costs next to nothing; each stage imports its engine when it runs.
"""

from __future__ import annotations

import os
import stat
import time
from typing import Callable, Optional, Union

from tilegen.runtime.diagnostics import (
    EXIT_COMPILE,
    EXIT_CONFIG,
    EXIT_INPUT,
    EXIT_USAGE,
    ByteOffsetLoc,
    CompileError,
    Diagnostic,
    DiagnosticError,
    FileLoc,
    file_line_col,
)
from tilegen.runtime.options import CompileOptions, Target, active, parse_target

BYTECODE_MAGIC = b"\x7fTileIR\x00"
NOT_BYTECODE = "input does not correspond to Tile IR bytecode"  # tileiras's words

#: ``after_pass(pass name, IR root, seconds)``
AfterPass = Callable[[str, object, float], None]
Source = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]"]


class Compilation:
    """One compile's artifacts: ``module`` (the IR root: the ``cuda_tile.module`` after
    ``read``, the ``builtin.module`` around it from ``optimize`` on), ``ptx`` (text), ``cubin``
    (bytes), ``ptxas_log``; ``timings``: stage, ``pass:<name>`` and ``verify:<stage>`` ->
    seconds, in the order they ran; ``stages``: the stages that ran."""

    def __init__(self, options: CompileOptions, name: str, data: Optional[bytes] = None):
        self.options = options
        self.name = name
        self.data = data
        self.module = None
        self.ptx: Optional[str] = None
        self.cubin: Optional[bytes] = None
        self.ptxas_log = ""
        #: the ``async`` stage's per-kernel decisions (runtime/passes/async_decision.AsyncDecision)
        self.async_plan: Optional[list] = None
        self.timings: dict[str, float] = {}
        self.stages: list[str] = []
        #: a ptxas started ahead, while the stages before ``ptxas`` run (runtime/ptxas.py)
        self.ptxas_pre = None

    def artifact(self, stage: str):
        """What ``stage`` produced: the module, the async decisions (text), the PTX text or the
        cubin bytes."""
        kind = STAGE_BY_NAME[stage].artifact
        if kind == "async-plan":
            from tilegen.runtime.passes.async_decision import report

            return report(self.async_plan or [])
        return self.ptx if kind == "ptx" else self.cubin if kind == "cubin" else self.module

    def _time(self, key: str, seconds: float) -> None:
        self.timings[key] = self.timings.get(key, 0.0) + seconds


# ----------------------------------------------------------------------------- input


def read_input(path: str, allow_stdin: bool = True) -> bytes:
    """The bytes of ``path`` (``-``: standard input, unless not ``allow_stdin`` as in tileiras).
    Only regular files are read: a directory, FIFO or device is refused at once (never blocks).
    Raises :class:`CompileError` (exit 1)."""
    import sys

    if path == "-" and allow_stdin:
        return sys.stdin.buffer.read()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise _unreadable(path, e.strerror or str(e)) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise _unreadable(path, "Is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise _unreadable(path, "not a regular file")
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise _unreadable(path, e.strerror or str(e)) from None
    finally:
        os.close(fd)


def _unreadable(path: str, why: str) -> CompileError:
    d = Diagnostic("error", f"unable to read input file: {why}", FileLoc(path))
    return CompileError([d], EXIT_USAGE, "read")


def source_bytes(source: object, name: Optional[str] = None) -> tuple[bytes, str]:
    """``(data, name)`` for what ``tilegen.compile`` accepts: bytecode or text as ``bytes``,
    MLIR text as ``str``, or a path (``os.PathLike``). Anything else is a CompileError (1)."""
    if name is not None and not isinstance(name, str):
        raise _usage_error(f"name must be a string, got {type(name).__name__}")
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        return data, name or ("<bytecode>" if data.startswith(BYTECODE_MAGIC) else "<input>")
    if isinstance(source, str):
        return source.encode("utf-8", "surrogatepass"), name or "<input>"
    if isinstance(source, os.PathLike):
        path = os.fspath(source)
        if not isinstance(path, str):
            path = os.fsdecode(path)
        return read_input(path), name or path
    raise _usage_error(
        "source must be bytes (bytecode or MLIR text), str (MLIR text) or a path "
        f"(os.PathLike), got {type(source).__name__}"
    )


def _usage_error(message: str) -> CompileError:
    return CompileError([Diagnostic("error", message)], EXIT_USAGE, "options")


def decode_text(name: str, data: bytes) -> str:
    """``data`` as UTF-8 text; a bad byte or a NUL is a located DiagnosticError."""
    from tilegen.runtime.attributes import FileLineColLoc

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        prefix = data[: e.start].decode("utf-8", "replace")
        message = f"invalid UTF-8 byte 0x{data[e.start]:02x} in source"
    else:
        nul = text.find("\0")
        if nul < 0:
            return text
        prefix = text[:nul]
        message = "unexpected NUL character in source (is this a binary file?)"
    line = prefix.count("\n") + 1
    col = len(prefix) - (prefix.rfind("\n") + 1) + 1
    raise DiagnosticError(Diagnostic("error", message, FileLineColLoc(name, line, col)))


def is_bytecode(data: bytes, name: str) -> bool:
    return data[:4] == BYTECODE_MAGIC[:4] or name.endswith(".tileirbc")


def bytecode_diagnostics(error, name: str) -> list[Diagnostic]:
    """A reader's :class:`BytecodeError` as one error (its innermost message) with the enclosing
    context messages as notes, each at the byte offset it names."""
    import re

    out: list[Diagnostic] = []
    for i, text in enumerate(getattr(error, "messages", None) or [str(error)]):
        m = re.match(r"error at offset (\d+): (.*)", text, re.S)
        loc = ByteOffsetLoc(name, int(m.group(1))) if m else FileLoc(name)
        d = Diagnostic("error" if i == 0 else "note", m.group(2) if m else text, loc)
        if i == 0:
            out.append(d)
        else:
            out[0].notes.append(d)
    return out


def read_module(data: bytes, name: str):
    """The module in ``data``: Tile IR bytecode, or MLIR text (``tileirdisasm`` output, a
    module body without its wrapper, included). Raises :class:`CompileError` (exit 3)."""
    if not data:
        raise CompileError([Diagnostic("error", NOT_BYTECODE, FileLoc(name))], EXIT_INPUT, "read")
    try:
        module = _read(data, name)
    except CompileError:
        raise
    except DiagnosticError as e:
        raise CompileError(list(e.preceding) + [e.diag], EXIT_INPUT, "read") from None
    except RecursionError:
        raise _internal("read", name, "input nested too deeply", EXIT_INPUT) from None
    except Exception as e:  # noqa: BLE001 - malformed input that crashes the reader
        if os.environ.get("TILEGEN_TRACEBACK"):
            raise
        raise _internal("read", name, f"{type(e).__name__}: {e}", EXIT_INPUT) from e
    if not any(op is not module for op in module.walk()) and module.name == "builtin.module":
        message = "input holds no module (expected Tile IR bytecode or a cuda_tile.module)"
        raise CompileError([Diagnostic("error", message, FileLoc(name))], EXIT_INPUT, "read")
    return module


def _read(data: bytes, name: str):
    if is_bytecode(data, name):
        from tilegen.runtime.bytecode import BytecodeError, read_bytecode

        try:
            return read_bytecode(data, name)
        except BytecodeError as e:
            raise CompileError(bytecode_diagnostics(e, name), EXIT_INPUT, "read") from None
    from tilegen.runtime.asm import parse_module

    text = decode_text(name, data)
    try:
        return parse_module(text, name)
    except DiagnosticError:
        if text.lstrip().startswith(("module", "cuda_tile.module")):
            raise
        try:  # tileirdisasm output: a module body without the wrapper
            return parse_module("cuda_tile.module @m {\n" + text + "\n}", name)
        except DiagnosticError:
            pass
        raise


def verify(module, name: str, exit_code: int = EXIT_INPUT, stage: str = "verify") -> None:
    """Run the verifier; its errors become a :class:`CompileError`."""
    from tilegen.runtime.diagnostics import DiagnosticEngine
    from tilegen.runtime.verify import verify_module

    engine = DiagnosticEngine()
    if not verify_module(module, engine) or engine.has_errors:
        errors = [d for d in engine.diagnostics if d.severity == "error"]
        if not errors:
            errors = [Diagnostic("error", f"the module does not verify after '{stage}'")]
        raise CompileError(_name_file(errors, name), exit_code, stage)


def load(source: Source, name: Optional[str] = None, verify_input: bool = True):
    """The read and verify stages alone: the verified ``cuda_tile`` module of ``source``
    (bytes, text or a path, as :func:`source_bytes`)."""
    data, name = source_bytes(source, name)
    module = read_module(data, name)
    if verify_input:
        verify(module, name)
    return module


def _name_file(diags: list[Diagnostic], name: str) -> list[Diagnostic]:
    """Diagnostics without a usable location name the input file instead."""
    for d in diags:
        if not isinstance(d.loc, (FileLoc, ByteOffsetLoc)) and file_line_col(d.loc) is None:
            d.loc = FileLoc(name)
    return diags


def _internal(stage: str, name: str, what: str, exit_code: int = EXIT_COMPILE) -> CompileError:
    d = Diagnostic("error", f"internal compiler error in stage '{stage}': {what}", FileLoc(name))
    return CompileError([d], exit_code, "internal")


# ----------------------------------------------------------------------------- stages


class Stage:
    """One row of the pipeline: ``run(compilation, after_pass)`` turns the previous artifact
    into ``artifact`` (``module`` / ``ptx`` / ``cubin``); a failure exits with ``exit_code``.
    ``passes(options)`` (pass stages only) lists the passes it runs, with typed options. (A
    plain class: a records dataclass costs ~2 ms of start-up for these seven rows.)"""

    __slots__ = ("name", "artifact", "exit_code", "run", "passes", "needs_target", "summary")

    def __init__(
        self,
        name: str,
        artifact: str,
        exit_code: int,
        run: Callable,
        passes: Optional[Callable] = None,
        needs_target: bool = False,
        summary: str = "",
    ):
        self.name, self.artifact, self.exit_code, self.run = name, artifact, exit_code, run
        self.passes, self.needs_target, self.summary = passes, needs_target, summary

    def __repr__(self) -> str:
        return f"Stage({self.name!r})"


def _stage_read(c: Compilation, after_pass) -> None:
    c.module = read_module(c.data, c.name)


def _stage_verify(c: Compilation, after_pass) -> None:
    if c.options.verify:
        verify(c.module, c.name)


def optimize_passes(options: CompileOptions) -> list:
    """``tile-optimize-O<N>`` expanded to its passes (runtime/passes/pipelines.py)."""
    from tilegen.runtime.passes.pipeline import parse_pipeline
    from tilegen.runtime.passes.pipelines import PIPELINES

    return parse_pipeline(PIPELINES[f"tile-optimize-O{options.opt_level}"])


def convert_passes(options: CompileOptions) -> list:
    from tilegen.runtime.passes.pipeline import PassRef

    cc = {"compute-capability": str(options.target.sm)}
    return [PassRef("convert-cuda-tile-to-nv-tileaa", cc)]


#: CompileOptions field -> the layout pass option that carries it (where the pass declares it)
LAYOUT_PASS_OPTIONS = {
    "use_wgmma": "wgmma",
    "use_tcgen05": "tcgen05",
    "use_cp_async": "cp-async",
    "pipelining": "pipeline",
    "num_stages": "num-stages",
    "num_warps": "num-warps",
}


def layout_passes(options: CompileOptions) -> list:
    """``nv-tileas-assign-layouts`` with the codegen choices as typed pass options, for every
    option the pass declares (the emitter reads the rest from :func:`options.current`)."""
    from tilegen.runtime.passes.pipeline import PassRef
    from tilegen.runtime.passes.registry import load_passes

    declared = load_passes()["nv-tileas-assign-layouts"].options
    pass_options = {}
    for field, key in LAYOUT_PASS_OPTIONS.items():
        value = getattr(options, field)
        if key in declared:
            pass_options[key] = str(value).lower() if isinstance(value, bool) else str(value or 0)
    return [
        PassRef("nv-tileaa-single-trip-loops", {}),
        PassRef("nv-tileaa-flatten-loops", {}),
        PassRef("nv-tileaa-loop-counters", {}),
        PassRef(
            "nv-tileaa-split-pair-rows",
            {
                "compute-capability": str(options.target.sm),
                "cta-pair": str(options.cta_pair is not False).lower(),
            },
        ),
        PassRef("nv-tileaa-split-k-tiles", {"compute-capability": str(options.target.sm)}),
        PassRef("nv-tileaa-split-select-conditions", {}),
        PassRef("nv-tileas-assign-layouts", pass_options),
    ]


def _pass_stage(name: str):
    def run(c: Compilation, after_pass) -> None:
        from tilegen.runtime.conversion.driver import wrap_module
        from tilegen.runtime.passes.pipeline import PassRef, PipelineError, run_pipeline
        from tilegen.runtime.passes.registry import PassFailure

        root = c.module = wrap_module(c.module)
        for ref in STAGE_BY_NAME[name].passes(c.options):
            label = ref.name if isinstance(ref, PassRef) else ref.anchor
            start = time.perf_counter()
            try:
                run_pipeline(root, [ref])
            except PassFailure as e:
                raise CompileError(_name_file(list(e.diagnostics), c.name), EXIT_COMPILE, name)
            except PipelineError as e:
                raise CompileError([Diagnostic("error", str(e))], EXIT_COMPILE, name) from None
            except DiagnosticError as e:
                diags = _name_file(list(e.preceding) + [e.diag], c.name)
                raise CompileError(diags, EXIT_COMPILE, name) from None
            seconds = time.perf_counter() - start
            c._time(f"pass:{label}", seconds)
            if after_pass is not None:
                after_pass(label, root, seconds)
        if c.options.verify:
            start = time.perf_counter()
            verify(root, c.name, EXIT_COMPILE, name)
            c._time(f"verify:{name}", time.perf_counter() - start)

    return run


def _stage_async(c: Compilation, after_pass) -> None:
    """Decide, per kernel, whether the async path (TMA pipeline, warp specialization, wgmma /
    tcgen05) applies and record why (``--emit=async-plan``); the emitter reads the decisions,
    which the IR carries as attributes (``--print-ir-after-all`` shows them after
    ``nv-tileas-async``)."""
    from tilegen.runtime.passes.async_rule import decide

    start = time.perf_counter()
    c.async_plan = decide(c.module, c.options, annotate=True)
    if after_pass is not None:
        after_pass("nv-tileas-async", c.module, time.perf_counter() - start)


def _stage_ptx(c: Compilation, after_pass) -> None:
    from tilegen.runtime.codegen import CodegenError, emit_ptx

    try:
        c.ptx = emit_ptx(c.module, c.options.target.sm, c.options)
    except CodegenError as e:
        raise CompileError(_name_file(list(e.diagnostics), c.name), EXIT_COMPILE, "ptx") from None
    if c.async_plan:  # a kernel the emitter put back on today's path (shared memory)
        from tilegen.runtime.passes.async_rule import after_codegen

        c.async_plan = after_codegen(c.async_plan, c.module)


def _stage_ptxas(c: Compilation, after_pass) -> None:
    from tilegen.runtime.ptxas import PtxasError, assemble, drop_occupancy_caps, options_flags

    extra = options_flags(c.options)  # -g / --sanitize: tileiras's ptxas flags
    try:
        pre, c.ptxas_pre = c.ptxas_pre, None
        try:
            c.cubin, c.ptxas_log = assemble(c.ptx, c.options.target.sm, extra=extra, pre=pre)
        finally:
            if pre is not None:
                pre.close()  # not taken (another -arch) or already the assembler's: a no-op
        return
    except PtxasError as e:
        error = e
    # an instruction that does not fit under the occupancy hint's register cap (C7602): the
    # kernel without the cap, as tileiras compiles it
    uncapped = drop_occupancy_caps(c.ptx, str(error))
    if uncapped is not None:
        try:
            c.cubin, log = assemble(uncapped, c.options.target.sm, extra=extra)
        except PtxasError as e:
            error = e
        else:
            c.ptx = uncapped
            c.ptxas_log = (
                "tilegen: the occupancy hint's .maxnreg dropped (ptxas C7602 under it)\n" + log
            )
            return
    raise CompileError([Diagnostic("error", str(error), FileLoc(c.name))], EXIT_COMPILE, "ptxas")


STAGES: tuple[Stage, ...] = (
    Stage("read", "module", EXIT_INPUT, _stage_read, summary="bytecode or text -> cuda_tile"),
    Stage("verify", "module", EXIT_INPUT, _stage_verify, summary="verify the input"),
    Stage(
        "optimize",
        "module",
        EXIT_COMPILE,
        _pass_stage("optimize"),
        optimize_passes,
        summary="tile-optimize-O<N>",
    ),
    Stage(
        "convert",
        "module",
        EXIT_COMPILE,
        _pass_stage("convert"),
        convert_passes,
        True,
        "cuda_tile -> nv_tileaa",
    ),
    Stage(
        "layouts",
        "module",
        EXIT_COMPILE,
        _pass_stage("layouts"),
        layout_passes,
        True,
        "assign nv_tileas layouts",
    ),
    Stage(
        "async",
        "async-plan",
        EXIT_COMPILE,
        _stage_async,
        needs_target=True,
        summary="async-path rule (TMA/mbarrier/warp specialization)",
    ),
    Stage("ptx", "ptx", EXIT_COMPILE, _stage_ptx, needs_target=True, summary="emit PTX"),
    Stage("ptxas", "cubin", EXIT_COMPILE, _stage_ptxas, needs_target=True, summary="ptxas"),
)
STAGE_BY_NAME = {s.name: s for s in STAGES}
STAGE_NAMES = tuple(s.name for s in STAGES)

#: ``tilegen compile --emit=X``: the stage whose artifact X is
EMIT = {
    "cuda_tile": "optimize",
    "nv_tileaa": "convert",
    "nv_tileas": "layouts",
    "async-plan": "async",
    "ptx": "ptx",
    "cubin": "ptxas",
}


def run_stages(
    c: Compilation,
    until: str = "ptxas",
    start: str = "read",
    after_pass: Optional[AfterPass] = None,
) -> Compilation:
    """Run the stages from ``start`` through ``until`` on ``c`` (options active throughout)."""
    names = STAGE_NAMES
    if until not in STAGE_BY_NAME or start not in STAGE_BY_NAME:
        raise ValueError(f"unknown stage: {until if until not in STAGE_BY_NAME else start}")
    rows = STAGES[names.index(start) : names.index(until) + 1]
    options = c.options
    if options.target is None and any(s.needs_target for s in rows):
        from tilegen.runtime.options import GPU_NAMES

        names = ", ".join(GPU_NAMES)
        message = f"no GPU architecture given: pass --gpu-name=sm_XX (one of {names})"
        raise CompileError([Diagnostic("error", message)], EXIT_CONFIG, "target")
    if options.sanitize is not None and any(s.name == "ptx" for s in rows):
        from tilegen.runtime.codegen.driver import EMITTED_SANITIZERS

        if options.sanitize not in EMITTED_SANITIZERS:
            message = (
                f"--sanitize={options.sanitize} is not supported by tilegen yet: its PTX "
                "emitter has no such instrumentation"
            )
            raise CompileError([Diagnostic("error", message)], EXIT_CONFIG, "options")
    with active(options):
        try:
            _run_rows(c, rows, after_pass)
        finally:
            if c.ptxas_pre is not None:  # the compile stopped before ptxas
                c.ptxas_pre.close()
                c.ptxas_pre = None
    return c


def _likely_arch(module, target) -> str:
    """The ``-arch`` ptxas will most likely get, guessed from the input module: the target
    named, with the ``a`` the code generator adds on sm_90/sm_100 for wgmma / tcgen05 when the
    kernel has a 2-D non-f64 ``mmaf``/``mmai`` with M a multiple of 64 (wgmma's; a wrong guess
    only costs the head start: flash_attention on sm_100 is the corpus's one)."""
    from tilegen.runtime.passes.async_decision import ASYNC_MMA

    if target.suffix or target.sm not in ASYNC_MMA:
        return target.name
    for op in module.walk():
        if op.name in ("cuda_tile.mmaf", "cuda_tile.mmai"):
            t = op.operands[0].type
            shape, element = getattr(t, "shape", ()), getattr(t, "element", None)
            if len(shape) == 2 and shape[0] % 64 == 0 and getattr(element, "name", "") != "f64":
                return target.name + "a"
    return target.name


def _prestart_ptxas(c: Compilation) -> None:
    from tilegen.runtime.ptxas import options_flags, prestart

    c.ptxas_pre = prestart(_likely_arch(c.module, c.options.target), options_flags(c.options))


def _run_rows(c: Compilation, rows, after_pass) -> None:
    head_start = rows[-1].name == "ptxas" and rows[0].name == "read"
    for stage in rows:
        t0 = time.perf_counter()
        try:
            stage.run(c, after_pass)
        except CompileError:
            raise
        except RecursionError:
            raise _internal(stage.name, c.name, "nesting too deep (RecursionError)") from None
        except Exception as e:  # noqa: BLE001 - a crash is a diagnostic, not a traceback
            if os.environ.get("TILEGEN_TRACEBACK"):
                raise
            raise _internal(stage.name, c.name, f"{type(e).__name__}: {e}") from e
        if stage.passes is None:
            c._time(stage.name, time.perf_counter() - t0)
        c.stages.append(stage.name)
        if head_start and stage.name == "read":
            _prestart_ptxas(c)


def compile_source(
    source: Source,
    options: CompileOptions,
    name: Optional[str] = None,
    until: str = "ptxas",
    after_pass: Optional[AfterPass] = None,
) -> Compilation:
    """Compile ``source`` (bytes, text or a path; :func:`source_bytes`) through ``until``."""
    if not isinstance(options, CompileOptions):
        raise _usage_error(f"options must be CompileOptions, got {type(options).__name__}")
    data, name = source_bytes(source, name)
    return run_stages(Compilation(options, name, data), until, "read", after_pass)


def compile_module(
    module,
    options: CompileOptions,
    until: str = "ptx",
    after_pass: Optional[AfterPass] = None,
    name: Optional[str] = None,
) -> Compilation:
    """Run ``optimize`` through ``until`` on an already-read (and verified) module; the module is
    rewritten in place."""
    if name is None:
        flc = file_line_col(getattr(module, "loc", None))
        name = flc.file if flc is not None else "<module>"
    c = Compilation(options, name)
    c.module = module
    return run_stages(c, until, "optimize", after_pass)


def options_for(gpu_name: Union[str, Target, None], **fields) -> CompileOptions:
    """``CompileOptions(target=parse_target(gpu_name), **fields)`` (None: no target)."""
    target = None if gpu_name is None else parse_target(gpu_name)
    return CompileOptions(target=target, **fields)


__all__ = [
    "EMIT",
    "STAGES",
    "STAGE_NAMES",
    "Compilation",
    "CompileError",
    "CompileOptions",
    "Stage",
    "Target",
    "compile_module",
    "compile_source",
    "decode_text",
    "load",
    "options_for",
    "parse_target",
    "read_input",
    "read_module",
    "run_stages",
    "source_bytes",
    "verify",
]
