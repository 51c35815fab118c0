"""``tilegen-opt``: parse, verify and print CUDA Tile IR, flag-compatible with ``cuda-tile-opt``.

Every chunk of the input is parsed (``tilegen.runtime.asm``), verified
(``tilegen.runtime.verify``), optionally transformed by passes (``tilegen.runtime.passes``) and
printed; ``--verify-diagnostics`` checks the diagnostics against
``expected-*`` annotations instead of printing them. Exit code 0 on success, 1 on any failure.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Optional

from tilegen.runtime.attributes import FileLineColLoc
from tilegen.runtime.diagnostics import Diagnostic, DiagnosticEngine, DiagnosticError
from tilegen.tools import driver

PROG = "tilegen-opt"


def _supported_passes() -> frozenset[str]:
    try:
        from tilegen.runtime.passes.pipelines import PIPELINES
        from tilegen.runtime.passes.registry import load_passes

        return frozenset(load_passes()) | frozenset(PIPELINES)
    except Exception as e:  # noqa: BLE001 - a broken pass module must not break tilegen-opt
        print(f"{PROG}: warning: passes unavailable ({type(e).__name__}: {e})", file=sys.stderr)
        return frozenset()


_SUPPORTED_PASSES: Optional[frozenset[str]] = None


def supported_passes() -> frozenset[str]:
    """Pass names tilegen-opt can run (runtime/passes); requests for others fail with a clean
    error.  Loaded on first use: importing every pass module costs start-up time that a plain
    parse/print run does not need."""
    global _SUPPORTED_PASSES
    if _SUPPORTED_PASSES is None:
        _SUPPORTED_PASSES = _supported_passes()
    return _SUPPORTED_PASSES


def __getattr__(name: str):
    # ``SUPPORTED_PASSES`` stays importable as a module attribute (computed lazily)
    if name == "SUPPORTED_PASSES":
        return supported_passes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class OptOptions:
    """What one ``tilegen-opt`` run does with each chunk."""

    filename: str = "<stdin>"
    no_implicit_module: bool = False
    allow_unregistered: bool = False
    generic: bool = False
    debuginfo: bool = False
    unsupported_hints: bool = False
    err_hints: bool = False
    passes: Optional[str] = None  # a requested pass pipeline (runtime/passes)
    print_output: bool = True


def command_line() -> driver.CommandLine:
    cl = driver.CommandLine(
        PROG, "tilegen CUDA Tile IR optimizer driver (cuda-tile-opt compatible)"
    )
    cl.option("o", dest="output", help="output filename", metavar="filename", default="-")
    cl.optional_value(
        "split-input-file",
        dest="split",
        help="split the input on '// -----' lines and process each chunk independently",
        implicit=driver.SPLIT_MARKER,
    )
    cl.option(
        "output-split-marker",
        dest="output_marker",
        help="marker joining the outputs of split chunks",
        default=driver.SPLIT_MARKER,
    )
    cl.flag("verify-diagnostics", dest="verify", help="check expected-* annotations in the input")
    cl.flag("allow-unregistered-dialect", dest="allow_unregistered", help="accept unknown ops")
    cl.flag("mlir-print-op-generic", dest="generic", help="print every op in the generic form")
    cl.flag("mlir-print-debuginfo", dest="debuginfo", help="print source locations")
    cl.flag("no-implicit-module", dest="no_implicit_module", help="do not wrap in builtin.module")
    cl.flag("Wunsupported-hints", dest="unsupported_hints", help="warn on unsupported hints")
    cl.flag("Werr-hints", dest="err_hints", help="treat optimization-hint warnings as errors")
    cl.flag("canonicalize", dest="canonicalize", help="run the canonicalizer")
    cl.flag("cse", dest="cse", help="eliminate common subexpressions")
    cl.option("pass-pipeline", dest="pass_pipeline", help="textual pass pipeline")
    cl.option(
        "test-debuginfo-update-symbol-name",
        dest="test_debuginfo_pass",
        help="test pass: rename a symbol and its debug-info linkage name",
    )
    return cl


def process_chunk(text: str, engine: DiagnosticEngine, opts: OptOptions) -> Optional[str]:
    """Parse, verify and print one chunk; diagnostics go to ``engine``; None on failure."""
    try:
        from tilegen.runtime.asm import parse_module
    except ImportError as e:
        engine.error(f"the parser is not available yet ({e})", FileLineColLoc(opts.filename, 1, 1))
        return None
    try:
        module = parse_module(
            text,
            opts.filename,
            no_implicit_module=opts.no_implicit_module,
            allow_unregistered=opts.allow_unregistered,
        )
    except DiagnosticError as e:
        engine.diagnostics.extend(e.preceding)
        engine.diagnostics.append(e.diag)
        return None
    if not _verify(module, engine, opts):
        return None
    if opts.passes is not None and not _run_passes(module, engine, opts):
        return None
    if not opts.print_output:
        return ""
    from tilegen.runtime.asm import print_module

    printed = print_module(module, generic=opts.generic, debuginfo=opts.debuginfo)
    return printed if printed.endswith("\n") else printed + "\n"


def _run_passes(module, engine: DiagnosticEngine, opts: OptOptions) -> bool:
    """Run the requested pipeline on ``module``; False after any diagnostic. A pass that is one
    of the compile driver's stages (``tile-optimize-O<N>``, ``convert-cuda-tile-to-nv-tileaa``
    with a ``compute-capability``, ``nv-tileas-assign-layouts``) runs as that stage
    (runtime/driver.py: its ``CompileOptions`` active, its verification, its diagnostics, as in
    ``tilegen compile``); every other pass runs through runtime/passes."""
    from tilegen.runtime.diagnostics import CompileError
    from tilegen.runtime.passes.pipeline import PipelineError, parse_pipeline, run_pipeline
    from tilegen.runtime.passes.registry import PassFailure

    try:
        for step in _steps(module, parse_pipeline(opts.passes)):
            if isinstance(step, list):
                run_pipeline(module, step)
            else:
                _run_stage(module, opts.filename, *step)
    except PassFailure as e:
        engine.diagnostics.extend(e.diagnostics)
        return False
    except CompileError as e:
        engine.diagnostics.extend(e.diagnostics)
        return False
    except PipelineError as e:
        engine.error(str(e), getattr(module, "loc", None) or FileLineColLoc(opts.filename, 1, 1))
        return False
    return _verify(module, engine, opts)


#: layout pass option -> CompileOptions field (the inverse of runtime/driver.LAYOUT_PASS_OPTIONS)
def _layout_fields() -> dict[str, str]:
    from tilegen.runtime.driver import LAYOUT_PASS_OPTIONS

    return {key: field for field, key in LAYOUT_PASS_OPTIONS.items()}


def _stage_of(ref, root) -> Optional[tuple[str, dict]]:
    """(driver stage, CompileOptions fields) when pass ``ref`` on ``root`` is exactly what that
    stage runs for some options; None for any other pass (run as a pass)."""
    from tilegen.runtime.conversion.driver import module_target
    from tilegen.runtime.diagnostics import CompileError
    from tilegen.runtime.options import OPT_LEVELS, parse_target
    from tilegen.runtime.passes.registry import parse_bool

    name, options = ref.name, ref.options
    if name.startswith("tile-optimize-O") and not options:
        level = name[len("tile-optimize-O") :]
        if level.isdigit() and int(level) in OPT_LEVELS:
            return "optimize", {"opt_level": int(level)}
        return None
    try:
        if name == "convert-cuda-tile-to-nv-tileaa" and set(options) == {"compute-capability"}:
            text = options["compute-capability"].strip()  # the driver's target rule judges it
            return "convert", {"target": text if text.startswith("sm_") else f"sm_{text}"}
        if name == "nv-tileas-assign-layouts" and set(options) <= set(_layout_fields()):
            target = module_target(root)
            if target is None:
                return None
            fields = {"target": parse_target(f"sm_{target}")}
            for key, text in options.items():
                field = _layout_fields()[key]
                counts = ("num_stages", "num_warps")
                fields[field] = int(text) if field in counts else parse_bool(text)
            for field in ("num_stages", "num_warps"):
                if fields.get(field) == 0:
                    fields[field] = None  # the pass's 0: each kernel's own
            return "layouts", fields
    except (CompileError, ValueError):
        return None  # not expressible as CompileOptions: the pass reports it
    return None


def _steps(root, elements):
    """``elements`` as steps, yielded one at a time (a stage pass is recognised when it is
    reached, on the IR the earlier steps left: the layout stage takes the target the
    conversion recorded): single-element pipelines (run as passes) and ``(stage, fields)``
    driver stages. Stage passes are recognised at the root: at top level or directly under a
    top-level ``builtin.module(...)`` anchor."""
    from tilegen.runtime.passes.pipeline import Nest, PassRef

    if root.name != "builtin.module":  # --no-implicit-module: the driver's stages need one
        yield list(elements)
        return
    for el in elements:
        if isinstance(el, PassRef):
            stage = _stage_of(el, root)
            yield [el] if stage is None else stage
        elif isinstance(el, Nest) and el.anchor == root.name:
            for inner in el.body:
                stage = _stage_of(inner, root) if isinstance(inner, PassRef) else None
                yield [Nest(el.anchor, [inner])] if stage is None else stage
        else:
            yield [el]


def _run_stage(root, filename: str, stage: str, fields: dict) -> None:
    """Driver stage ``stage`` on ``root`` in place, under ``CompileOptions(**fields)``."""
    from tilegen.runtime.driver import Compilation, run_stages
    from tilegen.runtime.options import CompileOptions

    c = Compilation(CompileOptions(**fields), filename)
    c.module = root
    run_stages(c, stage, stage)


def _verify(module, engine: DiagnosticEngine, opts: OptOptions) -> bool:
    try:
        from tilegen.runtime.verify import VerifyOptions, verify_module
    except ImportError:
        return True  # no verifier yet: parsing is all the checking there is
    ok = verify_module(
        module,
        engine,
        VerifyOptions(unsupported_hints=opts.unsupported_hints, err_hints=opts.err_hints),
    )
    return bool(ok) and not engine.has_errors


def requested_passes(o: dict) -> Optional[str]:
    """The pass pipeline the command line asks for, as one string (None when there is none)."""
    parts = []
    if o.get("canonicalize"):
        parts.append("canonicalize")
    if o.get("cse"):
        parts.append("cse")
    if o.get("pass_pipeline"):
        parts.append(o["pass_pipeline"])
    if o.get("test_debuginfo_pass"):
        parts.append(f"test-debuginfo-update-symbol-name{{{o['test_debuginfo_pass']}}}")
    return ",".join(parts) if parts else None


def _pass_names(pipeline: str) -> list[str]:
    """Pass names in a textual pipeline: ``builtin.module(cuda_tile.module(fuse-fma))`` ->
    ``['fuse-fma']`` (op-anchored nesting levels are not passes)."""
    names = re.findall(r"([A-Za-z_$][\w$.-]*)\s*(?=[(,){]|$)", re.sub(r"\{[^}]*\}", "", pipeline))
    return [n for n in names if n != "builtin.module" and not n.startswith("cuda_tile.")]


def options_from(o: dict, filename: str) -> OptOptions:
    return OptOptions(
        filename=filename,
        no_implicit_module=o["no_implicit_module"],
        allow_unregistered=o["allow_unregistered"],
        generic=o["generic"],
        debuginfo=o["debuginfo"],
        unsupported_hints=o["unsupported_hints"],
        err_hints=o["err_hints"],
        passes=requested_passes(o),
    )


def _body(o: dict) -> int:
    passes = requested_passes(o)
    if passes is not None:
        supported = supported_passes()
        unknown = [p for p in _pass_names(passes) if p not in supported]
        if unknown:
            raise driver.UsageError(
                f"'{unknown[0]}' does not refer to a registered pass or pass pipeline "
                f"(requested: {passes})"
            )
    name = driver.display_name(o["input"])
    data = driver.read_input_bytes(o["input"])
    try:
        source = driver.decode_source(name, data)
    except DiagnosticError as e:
        print(driver.render(e.diag, None), file=sys.stderr)
        return 1
    del data  # the decoded text is all that is needed from here
    opts = options_from(o, name)
    results = driver.run_buffer(
        source,
        lambda text, engine: process_chunk(text, engine, opts),
        split=o["split"],
        verify=o["verify"],
    )
    buf = _Pieces()
    status = driver.report(
        source, results, buf, sys.stderr, split=o["split"], output_marker=o["output_marker"]
    )
    del results  # the printed text now lives in buf alone
    # stdout is streamed as MLIR does; an output file is only kept on success
    if status == 0 or o["output"] in (None, "-"):
        driver.write_output(o["output"], buf.getvalue())
    return status


class _Pieces:
    """A write-only text sink that keeps what it is given (a ``StringIO`` would copy the
    printed module twice: into its buffer, then out of it)."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, s: str) -> int:
        self.parts.append(s)
        return len(s)

    def getvalue(self) -> str:
        return self.parts[0] if len(self.parts) == 1 else "".join(self.parts)


def main(argv: Optional[list[str]] = None) -> int:
    return driver.run_tool(PROG, command_line(), argv, _body)


if __name__ == "__main__":
    sys.exit(main())
