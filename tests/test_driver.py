"""runtime/driver.py: the stage table, the options reaching every stage, the one error type,
input rules, and the import boundary between runtime/ and the CLI."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from tilegen.runtime import driver
from tilegen.runtime.diagnostics import CompileError
from tilegen.runtime.options import TARGET_NAMES, CompileOptions, current
from tilegen.runtime.ptxas import find_ptxas

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TILEGEN_SHARED") or ROOT.parent / "shared")
OUT = SHARED / "corpus" / "cutile" / "out"
needs_corpus = pytest.mark.skipif(not OUT.is_dir(), reason="cuTile corpus not present")
needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="no ptxas")
VEC_ADD = (ROOT / "examples" / "vec_add.mlir").read_text()


def test_stage_table():
    assert driver.STAGE_NAMES == (
        "read",
        "verify",
        "optimize",
        "convert",
        "layouts",
        "async",
        "ptx",
        "ptxas",
    )
    assert [driver.STAGE_BY_NAME[s].exit_code for s in driver.STAGE_NAMES] == [3, 3] + [5] * 6
    assert set(driver.EMIT.values()) <= set(driver.STAGE_NAMES)
    # the conversion's target is a typed pass option built from the options, not spliced text
    (ref,) = driver.convert_passes(CompileOptions(target="sm_100a"))
    assert (ref.name, ref.options) == (
        "convert-cuda-tile-to-nv-tileaa",
        {"compute-capability": "100"},
    )
    names = [r.name for r in driver.optimize_passes(CompileOptions(opt_level=3))]
    assert names == ["canonicalize", "cse", "loop-split", "canonicalize"]
    assert driver.optimize_passes(CompileOptions(opt_level=0)) == []


@needs_ptxas
def test_every_stage_gives_its_artifact_and_timings():
    seen = []
    c = driver.compile_source(
        VEC_ADD,
        CompileOptions(target="sm_90"),
        "vec_add.mlir",
        after_pass=lambda name, root, s: seen.append((name, root.name)),
    )
    assert c.stages == list(driver.STAGE_NAMES)
    assert c.artifact("layouts").name == "builtin.module"
    assert c.artifact("ptx").startswith("//") and ".entry " in c.artifact("ptx")
    assert c.artifact("ptxas")[:4] == b"\x7fELF"
    assert [n for n, _ in seen] == [
        "canonicalize",
        "cse",
        "loop-split",
        "canonicalize",
        "convert-cuda-tile-to-nv-tileaa",
        "nv-tileaa-single-trip-loops",
        "nv-tileaa-flatten-loops",
        "nv-tileaa-loop-counters",
        "nv-tileaa-split-pair-rows",
        "nv-tileaa-split-k-tiles",
        "nv-tileaa-split-select-conditions",
        "nv-tileas-assign-layouts",
        "nv-tileas-async",  # (the async stage's decisions, on the IR: --print-ir-after-all)
    ]
    keys = list(c.timings)
    for k in ("read", "verify", "pass:canonicalize", "verify:optimize", "verify:convert", "ptx"):
        assert k in keys, keys
    assert keys.index("read") < keys.index("verify") < keys.index("ptx") < keys.index("ptxas")


def test_stop_after_a_stage_and_start_from_a_module():
    c = driver.compile_source(VEC_ADD, CompileOptions(), "v.mlir", until="optimize")
    assert c.stages == ["read", "verify", "optimize"] and c.ptx is None
    module = driver.load(VEC_ADD, "v.mlir")
    c = driver.compile_module(module, CompileOptions(target="sm_80"), "convert")
    assert c.stages == ["optimize", "convert"]
    assert any(op.name == "nv_tileaa.func" for op in c.module.walk())


def test_a_target_is_needed_from_convert_on():
    with pytest.raises(CompileError) as ei:
        driver.compile_source(VEC_ADD, CompileOptions(), "v.mlir", until="convert")
    assert (ei.value.exit_code, ei.value.stage) == (2, "target")
    assert str(ei.value).startswith("error: no GPU architecture given")


def test_options_reach_the_emitter(monkeypatch):
    """The emitter sees the compile's options (lineinfo, device_debug, sanitize included)."""
    from tilegen.runtime.codegen import emit

    seen = []
    original = emit.emit_kernel

    def spy(*args, **kwargs):
        seen.append(current())
        return original(*args, **kwargs)

    monkeypatch.setattr(emit, "emit_kernel", spy)
    options = CompileOptions(target="sm_90", opt_level=0, lineinfo=True, device_debug=True)
    driver.compile_source(VEC_ADD, options, "v.mlir", until="ptx")
    assert seen == [options]
    assert current() != options  # only during the compile


def test_codegen_switches_are_options_not_environment(monkeypatch):
    from test_codegen_pipeline import _module  # a K loop of dots, cp.async-staged and pipelined

    def ptx(**fields):  # (TMA off: the async path would take this C += A B loop)
        options = CompileOptions(target="sm_90", **{"use_tma": False, **fields})
        return driver.compile_module(_module("f16", "f32", 64, 64, 32), options, "ptx").ptx

    default = ptx()
    assert "wgmma.mma_async" in default and ".target sm_90a" in default
    assert "cp.async.c" in default and "__tilegen_pipe" in default
    for var in ("TILEGEN_NO_WGMMA", "TILEGEN_NO_CP_ASYNC", "TILEGEN_NO_PIPELINE"):
        monkeypatch.setenv(var, "1")
    assert ptx() == default  # no environment variable changes generated code
    no_wgmma = ptx(use_wgmma=False)
    assert "wgmma" not in no_wgmma and "mma.sync.aligned" in no_wgmma
    assert ".target sm_90\n" in no_wgmma
    assert "cp.async.c" not in ptx(use_cp_async=False)
    no_pipe = ptx(pipelining=False)
    assert "cp.async.c" in no_pipe and "__tilegen_pipe" not in no_pipe
    assert ptx(num_stages=1) == no_pipe  # one stage: nothing to prefetch
    assert ptx(num_stages=3) != default  # the override reaches the emitter


@needs_ptxas
@pytest.mark.parametrize("name", TARGET_NAMES)
def test_every_accepted_target_assembles(name):
    """The one target rule promises every name it accepts: each gives ``.target <name>``
    (wgmma-free code) and a cubin ptxas accepts."""
    c = driver.compile_source(VEC_ADD, CompileOptions(target=name), "v.mlir")
    assert f".target {name}\n" in c.ptx
    assert c.cubin[:4] == b"\x7fELF"


def test_sanitizer_is_refused_unless_emitted(monkeypatch):
    from tilegen.runtime.codegen import driver as codegen_driver

    options = CompileOptions(target="sm_90", sanitize="memcheck")
    c = driver.compile_source(VEC_ADD, options, "v.mlir", until="ptx")  # memcheck is emitted
    assert c.stages[-1] == "ptx"
    monkeypatch.setattr(codegen_driver, "EMITTED_SANITIZERS", ())
    c = driver.compile_source(VEC_ADD, options, "v.mlir", until="layouts")  # not needed before ptx
    assert c.stages[-1] == "layouts"
    with pytest.raises(CompileError) as ei:
        driver.compile_source(VEC_ADD, options, "v.mlir", until="ptx")
    assert (ei.value.exit_code, ei.value.stage) == (2, "options")
    assert "--sanitize=memcheck is not supported by tilegen yet" in str(ei.value)


def test_failures_carry_stage_and_exit_class(monkeypatch):
    bad = "cuda_tile.module @m {\n  entry @k() {\n    %x = bogus\n  }\n}\n"
    with pytest.raises(CompileError) as ei:
        driver.compile_source(bad, CompileOptions(target="sm_90"), "bad.mlir")
    assert (ei.value.exit_code, ei.value.stage) == (3, "read")
    assert str(ei.value).startswith("bad.mlir:3:")
    from tilegen.runtime import ptxas

    def broken(ptx, sm, verbose=False, **kwargs):
        raise ptxas.PtxasError("ptxas failed:\nptxas fatal   : pretend")

    monkeypatch.setattr(ptxas, "assemble", broken)
    with pytest.raises(CompileError) as ei:
        driver.compile_source(VEC_ADD, CompileOptions(target="sm_90"), "v.mlir")
    assert (ei.value.exit_code, ei.value.stage) == (5, "ptxas")
    assert str(ei.value).startswith("v.mlir: error: ptxas failed:")


def test_a_crash_in_a_stage_is_an_internal_error(monkeypatch):
    from tilegen.runtime.codegen import emit

    def boom(*args, **kwargs):
        raise KeyError("no handler")

    monkeypatch.setattr(emit, "emit_kernel", boom)
    monkeypatch.delenv("TILEGEN_TRACEBACK", raising=False)
    with pytest.raises(CompileError) as ei:
        driver.compile_source(VEC_ADD, CompileOptions(target="sm_90"), "v.mlir", until="ptx")
    assert (ei.value.exit_code, ei.value.stage) == (5, "internal")
    assert str(ei.value) == (
        "v.mlir: error: internal compiler error in stage 'ptx': KeyError: 'no handler'"
    )


def _spy_prestart(monkeypatch) -> list:
    from tilegen.runtime import ptxas

    started, real = [], ptxas.prestart

    def spy(arch, flags=()):
        pre = real(arch, flags)
        started.append((arch, pre, pre.proc if pre else None))
        return pre

    monkeypatch.setattr(ptxas, "prestart", spy)
    return started


@needs_ptxas
@pytest.mark.parametrize("guess", ["sm_90", "sm_90a"])
def test_ptxas_started_ahead_gives_the_same_cubin(monkeypatch, guess):
    """ptxas starts once the input is read and loads while the compiler works; the cubin is the
    one a ptxas started at the end gives. A process started for another -arch is killed, and a
    fresh one runs (the PTX of vec_add is plain sm_90)."""
    from tilegen.runtime import ptxas

    late = driver.compile_source(VEC_ADD, CompileOptions(target="sm_90"), "v.mlir", until="ptx")
    expected, _ = ptxas.assemble(late.ptx, 90)
    started = _spy_prestart(monkeypatch)
    monkeypatch.setattr(driver, "_likely_arch", lambda module, target: guess)
    c = driver.compile_source(VEC_ADD, CompileOptions(target="sm_90"), "v.mlir")
    assert c.cubin == expected
    ((arch, pre, proc),) = started
    assert arch == guess and pre.proc is None  # taken or closed, never left behind
    assert proc.returncode == (0 if guess == "sm_90" else -9)  # ran to the end / killed


@needs_ptxas
def test_a_compile_that_stops_early_stops_its_ptxas(monkeypatch):
    started = _spy_prestart(monkeypatch)
    bad = VEC_ADD.replace("addf", "addi", 1)  # float operands for an integer op: verify fails
    with pytest.raises(CompileError) as ei:
        driver.compile_source(bad, CompileOptions(target="sm_90"), "v.mlir")
    assert ei.value.stage == "verify"
    ((_, pre, proc),) = started
    assert pre.proc is None and proc.returncode is not None


def test_likely_arch_follows_the_tensor_core_dots():
    """The guess of ``-arch`` made from the input: ``a`` on sm_90/sm_100 where the kernel has a
    dot the code generator gives to wgmma / tcgen05, the named target otherwise."""
    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.options import parse_target

    vec = parse_module(VEC_ADD, "v.mlir")
    assert driver._likely_arch(vec, parse_target("sm_90")) == "sm_90"
    assert driver._likely_arch(vec, parse_target("sm_100f")) == "sm_100f"


@needs_corpus
@pytest.mark.parametrize(
    "kernel, target, arch",
    [
        ("matmul_f16", "sm_90", "sm_90a"),
        ("matmul_f16", "sm_100", "sm_100a"),
        ("matmul_f16", "sm_120", "sm_120a"),  # (its async path: docs/pipelines.md section 31)
        ("matmul_f64", "sm_90", "sm_90"),
        ("batched_matmul", "sm_90", "sm_90"),
        ("softmax", "sm_90", "sm_90"),
    ],
)
def test_likely_arch_on_the_corpus(kernel, target, arch):
    from tilegen.runtime.options import parse_target

    c = driver.compile_source(
        OUT / f"{kernel}.tileirbc", CompileOptions(target=target), until="read"
    )
    assert driver._likely_arch(c.module, parse_target(target)) == arch
    # the guess is what the code generator then asks for
    c = driver.compile_source(
        OUT / f"{kernel}.tileirbc", CompileOptions(target=target), until="ptx"
    )
    assert f"\n.target {arch}\n" in c.ptx


@needs_corpus
def test_verifier_failure_is_input_class_and_names_the_file():
    name = str(OUT / "uint_floordiv_bug.tileirbc")
    with pytest.raises(CompileError) as ei:
        driver.compile_source(Path(name), CompileOptions(target="sm_90"))
    assert (ei.value.exit_code, ei.value.stage) == (3, "verify")
    assert "'cuda_tile.divi' op rounding mode" in str(ei.value)
    assert str(ei.value).startswith("kernels.py:")  # the bytecode's debug location


@needs_corpus
def test_bytecode_errors_give_nvidia_offsets():
    data = (OUT / "vec_add.tileirbc").read_bytes()[:40]
    with pytest.raises(CompileError) as ei:
        driver.read_module(data, "t.tileirbc")
    d = ei.value.diagnostics[0]
    assert d.format().splitlines() == [
        "t.tileirbc: error: section length 137 exceeds remaining data size 25 (at byte offset 15)",
        # tileirdisasm: "error: error at offset 15: failed to parse section header"
        "t.tileirbc: note: failed to parse section header (at byte offset 15)",
    ]


def test_text_input_rules():
    with pytest.raises(CompileError) as ei:
        driver.read_module(b"cuda_tile.module @m {\n  \xfe\n}\n", "g.mlir")
    assert str(ei.value) == "g.mlir:2:3: error: invalid UTF-8 byte 0xfe in source"
    with pytest.raises(CompileError) as ei:
        driver.read_module(b"cuda_tile.module @m {\0}", "n.mlir")
    assert str(ei.value).startswith("n.mlir:1:22: error: unexpected NUL character")
    with pytest.raises(CompileError) as ei:
        driver.read_module(b"", "e.mlir")
    assert str(ei.value) == "e.mlir: error: input does not correspond to Tile IR bytecode"
    with pytest.raises(CompileError) as ei:
        driver.read_module(b"\n\n", "w.mlir")
    assert ei.value.exit_code == 3 and "input holds no module" in str(ei.value)
    # tileirdisasm output: an entry without its module wrapper
    body = VEC_ADD.split("{", 1)[1].rsplit("}", 1)[0]
    assert driver.read_module(body.encode(), "d.mlir").name == "builtin.module"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_read_input_refuses_non_regular_files(tmp_path):
    os.mkfifo(tmp_path / "f")
    for path, why in [
        (tmp_path / "f", "not a regular file"),
        (tmp_path, "Is a directory"),
        (tmp_path / "missing", "No such file or directory"),
    ]:
        with pytest.raises(CompileError) as ei:
            driver.read_input(str(path))
        assert ei.value.exit_code == 1
        assert str(ei.value) == f"{path}: error: unable to read input file: {why}"


def test_the_interpreter_error_is_the_compile_error():
    from tilegen.runtime.interp.api import RunError

    assert issubclass(RunError, CompileError)
    import tilegen

    assert tilegen.CompileError is CompileError is driver.CompileError


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_runtime_does_not_import_the_cli():
    """runtime/ is the compiler; the CLI and API sit on top of it (function-level imports
    included)."""
    cli = ("tilegen.commands", "tilegen.api", "tilegen.cli", "tilegen.tools", "tilegen.cache")
    offenders = {
        str(p.relative_to(ROOT)): sorted(m for m in _imported_modules(p) if m.startswith(cli))
        for p in (ROOT / "runtime").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}
