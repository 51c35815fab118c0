"""tilegen.compile (tilegen/api.py): results, diagnostics, exit codes, the compile cache."""

import json
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

import tilegen
from tilegen import api
from tilegen import cache as tcache
from tilegen import version as tversion
from tilegen.runtime.options import CompileOptions
from test_codegen_corpus import SUPPORTED  # the one list of supported corpus kernels

from paths import CORPUS  # ../shared or $TILEGEN_SHARED

OUT = CORPUS / "out"
needs_corpus = pytest.mark.skipif(not OUT.is_dir(), reason="cuTile corpus not present")
ELF_MAGIC = b"\x7fELF"

#: corpus kernels that compile to a cubin: the ones the PTX backend supports on every target
EXPECTED_TO_COMPILE_CORPUS = sorted(SUPPORTED)


def _manifest() -> dict:
    return {k["name"]: k for k in json.loads((CORPUS / "manifest.json").read_text())["kernels"]}


def _corpus_names() -> list[str]:
    if not OUT.is_dir():
        return []
    return sorted(p.stem for p in OUT.glob("*.tileirbc") if ".v13_1" not in p.name)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGEN_CACHE_DIR", str(tmp_path / "cache"))


def test_import_tilegen_is_lazy():
    code = "import sys, tilegen; print(sorted(m for m in sys.modules if m.startswith('tilegen')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['tilegen']"
    code = "import tilegen, sys; tilegen.CompileError; print('tilegen.api' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


@needs_corpus
@pytest.mark.parametrize("name", EXPECTED_TO_COMPILE_CORPUS)
def test_expected_corpus_kernels_compile(name):
    symbol = _manifest()[name]["variants"]["default"]["entry"]["symbol"]
    r = tilegen.compile((OUT / f"{name}.tileirbc").read_bytes(), "sm_90", cache=False)
    assert r.ok and not r.cache_hit and r.cache_key is None
    assert r.cubin[:4] == ELF_MAGIC
    assert f".entry {symbol}(" in r.ptx and ".target sm_90" in r.ptx
    stages = list(r.timings)
    for stage in ("read", "verify", "pass:convert-cuda-tile-to-nv-tileaa", "ptx", "ptxas"):
        assert stage in stages, stages
    assert stages.index("read") < stages.index("verify") < stages.index("ptx")
    assert stages.index("ptx") < stages.index("ptxas") < stages.index("total")
    parts = sum(v for k, v in r.timings.items() if k != "total")
    assert 0 < parts <= r.timings["total"] * 1.01


@needs_corpus
@pytest.mark.parametrize(
    "name", [n for n in _corpus_names() if n not in EXPECTED_TO_COMPILE_CORPUS]
)
def test_other_corpus_kernels_fail_with_located_diagnostics(name):
    """Either compiles (then: add it to EXPECTED_TO_COMPILE_CORPUS) or fails as tileiras does:
    exit 3 for invalid input, 5 for what tilegen cannot compile, every error located."""
    from tilegen.runtime.diagnostics import file_line_col

    expect_invalid = _manifest()[name]["expect_tileiras_fail"]
    try:
        r = tilegen.compile(OUT / f"{name}.tileirbc", "sm_90", cache=False)
    except tilegen.CompileError as e:
        assert e.exit_code == (3 if expect_invalid else 5), (e.stage, str(e))
        assert e.stage != "internal", str(e)
        assert e.diagnostics and all(file_line_col(d.loc) is not None for d in e.diagnostics)
        assert all(": error: " in line for line in str(e).splitlines()), str(e)
        return
    assert not expect_invalid, f"{name} must be rejected"
    assert r.cubin[:4] == ELF_MAGIC
    warnings.warn(f"{name} now compiles: add it to EXPECTED_TO_COMPILE_CORPUS")


@needs_corpus
def test_mlir_text_and_path_inputs_match_bytecode():
    a = tilegen.compile((OUT / "vec_add.tileirbc").read_bytes(), cache=False)
    b = tilegen.compile((OUT / "vec_add.mlir").read_text(), cache=False)
    c = tilegen.compile(OUT / "vec_add.tileirbc", cache=False)
    assert a.ptx == b.ptx == c.ptx


@pytest.mark.parametrize(
    "kwargs, code, stage, text",
    [
        ({"gpu_name": "sm_99"}, 2, "target", "GPU architecture 'sm_99' is not supported"),
        ({"gpu_name": "sm_75"}, 2, "target", "supported: sm_80, sm_86"),
        ({"gpu_name": "90"}, 2, "target", "'90' is not supported"),
        ({"gpu_name": 90}, 1, "options", "gpu_name must be a string"),
        ({"gpu_name": None}, 2, "target", "no GPU architecture given"),
        ({"opt_level": 4}, 2, "options", "invalid optimization level: 4"),
        ({"opt_level": 3.0}, 1, "options", "opt_level must be an int 0-3, got 3.0 (float)"),
        ({"opt_level": True}, 1, "options", "opt_level must be an int 0-3, got True (bool)"),
        ({"opt_level": "3"}, 1, "options", "opt_level must be an int"),
        ({"lineinfo": "yes"}, 1, "options", "lineinfo must be True or False"),
        ({"device_debug": 1}, 1, "options", "device_debug must be True or False"),
        ({"opt_level": 3, "device_debug": True}, 2, "options", "optimized debugging"),
        ({"sanitize": "asan"}, 2, "options", "unknown sanitizer 'asan'; supported: memcheck"),
        ({"sanitize": True}, 1, "options", "sanitize must be None or 'memcheck'"),
        ({"cache": "no"}, 1, "options", "cache must be True or False"),
        ({"name": 7}, 1, "options", "name must be a string"),
        ({"options": {"opt_level": 3}}, 1, "options", "options must be CompileOptions"),
    ],
)
def test_bad_arguments_raise_compile_error(kwargs, code, stage, text):
    """Any bad argument is a CompileError with a clear one-line message (never a TypeError),
    exit 1 for a wrong type, 2 for a value out of range (as tileiras's command line)."""
    with pytest.raises(tilegen.CompileError) as ei:
        tilegen.compile("cuda_tile.module @m {}", **{"cache": False, **kwargs})
    assert (ei.value.exit_code, ei.value.stage) == (code, stage), str(ei.value)
    assert text in str(ei.value)
    assert str(ei.value).startswith("error: ") and "\n" not in str(ei.value)


@pytest.mark.parametrize("source", [None, 42, 4.5, {}, [b"x"], object()])
def test_bad_source_types(source):
    with pytest.raises(tilegen.CompileError) as ei:
        tilegen.compile(source, "sm_90", cache=False)
    assert ei.value.exit_code == 1 and ei.value.stage == "options"
    assert "source must be bytes (bytecode or MLIR text), str (MLIR text) or a path" in str(
        ei.value
    )


def test_variant_targets_are_accepted():
    r = tilegen.compile("cuda_tile.module @m {}", "sm_90a", cache=False)
    assert ".target sm_90a" in r.ptx and r.gpu_name == "sm_90a"
    r = tilegen.compile("cuda_tile.module @m {}", "sm_100f", cache=False)
    assert ".target sm_100f" in r.ptx and r.cubin[:4] == ELF_MAGIC


def test_compile_options_are_frozen_and_validated():
    o = CompileOptions(target="sm_90a", opt_level=2, use_wgmma=False)
    assert o.target.name == "sm_90a" and o.target.sm == 90 and o.target.suffix == "a"
    with pytest.raises(Exception):
        o.opt_level = 3
    with pytest.raises(tilegen.CompileError):
        CompileOptions(num_stages=0)
    with pytest.raises(tilegen.CompileError):
        CompileOptions(num_stages=True)
    assert CompileOptions().opt_level == 3  # tileiras's default, everywhere


def test_empty_inputs_behave_as_tileiras():
    """Zero bytes are not Tile IR (tileiras: exit 3); text that holds no module neither."""
    for source in (b"", "", "  \n"):
        with pytest.raises(tilegen.CompileError) as ei:
            tilegen.compile(source, "sm_90", cache=False, name="e.tileirbc")
        assert ei.value.exit_code == 3 and ei.value.stage == "read", str(ei.value)
    with pytest.raises(tilegen.CompileError) as ei:
        tilegen.compile(b"", "sm_90", cache=False, name="e.tileirbc")
    assert str(ei.value) == "e.tileirbc: error: input does not correspond to Tile IR bytecode"


def test_empty_module_compiles(tmp_path):
    """An empty but well-formed module compiles (cuTile probes bytecode versions with one)."""
    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.bytecode import write_bytecode

    data = write_bytecode(parse_module("cuda_tile.module @m {}", no_implicit_module=True), "13.4")
    r = tilegen.compile(data, "sm_90", cache=False)
    assert r.cubin[:4] == ELF_MAGIC and ".entry" not in r.ptx
    (tmp_path / "e.tileirbc").write_bytes(data)
    assert tilegen.compile(tmp_path / "e.tileirbc", "sm_90", cache=False).cubin == r.cubin


def _in_thread(fn, seconds=20.0):
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["error"] = e

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"blocked for more than {seconds} s"
    return box


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_and_directory_are_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    box = _in_thread(lambda: tilegen.compile(tmp_path / "fifo", "sm_90", cache=False))
    e = box.get("error")
    assert isinstance(e, tilegen.CompileError) and e.exit_code == 1, box
    assert str(e) == f"{tmp_path / 'fifo'}: error: unable to read input file: not a regular file"
    box = _in_thread(lambda: tilegen.compile(tmp_path, "sm_90", cache=False))
    e = box.get("error")
    assert isinstance(e, tilegen.CompileError) and e.exit_code == 1, box
    assert str(e).endswith("unable to read input file: Is a directory")


def test_bad_inputs_are_located_exit_3():
    with pytest.raises(tilegen.CompileError) as ei:
        tilegen.compile("cuda_tile.module @m {\n  bogus.op\n}", name="k.mlir", cache=False)
    assert ei.value.exit_code == 3 and ei.value.stage == "read"
    assert str(ei.value).startswith("k.mlir:2:")
    with pytest.raises(tilegen.CompileError) as ei:
        tilegen.compile(b"\x7fTileIR\x00\x0d\x04\x00\x00\x82", cache=False)
    assert ei.value.exit_code == 3
    assert str(ei.value).startswith("<bytecode>: error: ")
    assert "(at byte offset 13)" in str(ei.value)
    with pytest.raises(tilegen.CompileError) as ei:
        tilegen.compile(b"cuda_tile.module @m {\n \xff }", name="g.mlir", cache=False)
    assert str(ei.value) == "g.mlir:2:2: error: invalid UTF-8 byte 0xff in source"


def test_unreadable_path_exit_1(tmp_path):
    with pytest.raises(tilegen.CompileError) as ei:
        tilegen.compile(tmp_path / "missing.tileirbc")
    assert ei.value.exit_code == 1
    assert str(ei.value) == (
        f"{tmp_path / 'missing.tileirbc'}: error: unable to read input file: "
        "No such file or directory"
    )
    assert "Errno" not in str(ei.value)


def _entries(directory: Path) -> list[Path]:
    return sorted(directory.rglob("*.entry"))


@needs_corpus
def test_cache_hit_miss_and_key(tmp_path):
    data = (OUT / "vec_add.tileirbc").read_bytes()
    first = tilegen.compile(data, "sm_90")
    assert not first.cache_hit and first.cache_key
    assert [p.name for p in _entries(tmp_path / "cache")] == [first.cache_key + ".entry"]
    second = tilegen.compile(data, "sm_90")
    assert second.cache_hit and second.cubin == first.cubin and second.ptx == first.ptx
    assert "read" not in second.timings  # nothing was recompiled
    other = tilegen.compile(data, "sm_90", opt_level=2)
    assert not other.cache_hit and other.cache_key != first.cache_key
    arch = tilegen.compile(data, "sm_80")
    assert arch.cache_key not in (first.cache_key, other.cache_key)
    assert ".target sm_80" in arch.ptx
    variant = tilegen.compile(data, "sm_90a")
    assert variant.cache_key != first.cache_key and ".target sm_90a" in variant.ptx
    off = tilegen.compile(data, "sm_90", cache=False)
    assert off.cache_key is None and not off.cache_hit


def test_cache_key_inputs(tmp_path):
    """Every compile option, the ptxas version and tilegen's fingerprint are in the key."""
    d = tmp_path / "c"
    base = CompileOptions(target="sm_90")
    key = tcache.key_for(base, b"x", "v1", d)
    assert tcache.key_for(base, b"x", "v1", d) == key
    from tilegen.runtime.records import replace

    for change in [
        {"target": "sm_90a"},
        {"opt_level": 0},
        {"num_stages": 3},
        {"use_wgmma": False},
        {"use_cp_async": False},
        {"pipelining": False},
        {"lineinfo": True},
        {"verify": False},
    ]:
        assert tcache.key_for(replace(base, **change), b"x", "v1", d) != key, change
    assert tcache.key_for(base, b"y", "v1", d) != key
    assert tcache.key_for(base, b"x", "v2", d) != key  # tilegen's version / fingerprint
    memo = (d / "ptxas-versions").read_text()
    assert "Cuda compilation tools" in memo  # the ptxas version, memoised by binary stamp
    stamp, version = memo.splitlines()[0].rsplit("\t", 1)
    (d / "ptxas-versions").write_text(f"{stamp}\tptxas 99.9 (pretend)\n")
    assert tcache.key_for(base, b"x", "v1", d) != key


@needs_corpus
@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_damaged_cache_entry_is_recompiled(tmp_path, damage):
    data = (OUT / "vec_add.tileirbc").read_bytes()
    first = tilegen.compile(data, "sm_90")
    (entry,) = _entries(tmp_path / "cache")
    blob = entry.read_bytes()
    if damage == "truncate":  # the case: a 16-byte cubin
        entry.write_bytes(blob[: -len(first.cubin)] + first.cubin[:16])
    elif damage == "flip":
        entry.write_bytes(blob[:-100] + bytes([blob[-100] ^ 1]) + blob[-99:])
    else:
        entry.write_bytes(b"\x7fELF" + b"\0" * 12)
    again = tilegen.compile(data, "sm_90")
    assert not again.cache_hit, "a damaged entry was served"
    assert again.cubin == first.cubin and again.ptx == first.ptx
    third = tilegen.compile(data, "sm_90")  # the entry was rewritten
    assert third.cache_hit and third.cubin == first.cubin


def test_cache_key_mirrors_cutile():
    cutile_cache = pytest.importorskip("cutile_cache._cache", reason="cuda-tile not installed")
    for args in [("v1", "sm_90", 3, b"abc", False), ("tilegen x", "sm_100", 0, b"", True)]:
        assert api.cache_key(*args) == cutile_cache.cache_key(*args)
    assert api.cache_key("v", "sm_90", 3, b"x", lineinfo=True) != api.cache_key(
        "v", "sm_90", 3, b"x"
    )


def test_compiler_version_changes_with_sources(tmp_path, monkeypatch):
    text = api.compiler_version()
    assert "tilegen" in text and "Cuda compilation tools, release" in text
    monkeypatch.setattr(tversion, "_FINGERPRINT", None)
    monkeypatch.setattr(tversion, "_source_roots", lambda: [tmp_path])
    (tmp_path / "a.py").write_text("x = 1\n")
    one = api.build_fingerprint()
    monkeypatch.setattr(tversion, "_FINGERPRINT", None)
    (tmp_path / "a.py").write_text("x = 22\n")
    assert api.build_fingerprint() != one


@needs_corpus
def test_tilegen_compile_cli_still_emits_cubin(tmp_path):
    from tilegen.cli import main

    out = tmp_path / "v.cubin"
    assert main(["compile", str(OUT / "vec_add.tileirbc"), "--gpu-name=sm_90", "--emit=cubin",
                 "-o", str(out)]) == 0  # fmt: skip
    assert out.read_bytes()[:4] == ELF_MAGIC
    ptx = tmp_path / "v.ptx"
    assert main(["compile", str(OUT / "vec_add.tileirbc"), "--gpu-name=sm_90", "--emit=ptx",
                 "-o", str(ptx)]) == 0  # fmt: skip
    # the CLI's default opt level is the API's (-O3)
    assert ptx.read_text() == tilegen.compile(OUT / "vec_add.tileirbc", cache=False).ptx


@needs_corpus
def test_one_default_opt_level_compile_cli_equals_shim(tmp_path):
    """``tilegen compile --emit=cubin`` and ``tilegen-tileiras`` (both -O3 by default) give the
    same cubin; for_loops is a kernel whose -O0 and -O3 cubins differ (loop-split)."""
    from tilegen.cli import main
    from tilegen.tools import tileiras

    src = str(OUT / "for_loops.tileirbc")
    o0 = tilegen.compile(OUT / "for_loops.tileirbc", "sm_90", 0, cache=False).cubin
    assert main(["compile", src, "--gpu-name=sm_90", "-o", str(tmp_path / "a.cubin")]) == 0
    assert tileiras.main(["--gpu-name=sm_90", src, "-o", str(tmp_path / "b.cubin")]) == 0
    a, b = (tmp_path / "a.cubin").read_bytes(), (tmp_path / "b.cubin").read_bytes()
    assert a == b and a != o0
    assert a == tilegen.compile(OUT / "for_loops.tileirbc", "sm_90", cache=False).cubin
