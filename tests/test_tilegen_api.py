"""tilegen.compile (tilegen/api.py): results, diagnostics, exit codes, the compile cache."""

import json
import os
import subprocess
import sys
import warnings

import pytest

import tilegen
from tilegen import api
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
        ({"gpu_name": "sm_99"}, 2, "target", "sm_99 is not supported"),
        ({"gpu_name": "sm_90a"}, 2, "target", "not supported"),
        ({"opt_level": 4}, 2, "target", "invalid optimization level: 4"),
        ({"opt_level": 3, "device_debug": True}, 2, "target", "optimized debugging"),
    ],
)
def test_bad_configuration(kwargs, code, stage, text):
    with pytest.raises(tilegen.CompileError) as ei:
        tilegen.compile("cuda_tile.module @m {}", **kwargs)
    assert (ei.value.exit_code, ei.value.stage) == (code, stage)
    assert text in str(ei.value)


def test_bad_inputs_are_located_exit_3():
    with pytest.raises(tilegen.CompileError) as ei:
        tilegen.compile("cuda_tile.module @m {\n  bogus.op\n}", name="k.mlir", cache=False)
    assert ei.value.exit_code == 3 and ei.value.stage == "read"
    assert str(ei.value).startswith("k.mlir:2:")
    with pytest.raises(tilegen.CompileError) as ei:
        tilegen.compile(b"\x7fTileIR\x00\x0d\x04\x00\x00\x82", cache=False)
    assert ei.value.exit_code == 3 and "error: " in str(ei.value)


def test_unreadable_path_exit_1(tmp_path):
    with pytest.raises(tilegen.CompileError) as ei:
        tilegen.compile(tmp_path / "missing.tileirbc")
    assert ei.value.exit_code == 1 and "unable to read input file" in str(ei.value)


@needs_corpus
def test_cache_hit_miss_and_key(tmp_path):
    data = (OUT / "vec_add.tileirbc").read_bytes()
    first = tilegen.compile(data, "sm_90")
    assert not first.cache_hit and first.cache_key
    files = sorted(p.name for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert files == [first.cache_key + ".cubin", first.cache_key + ".ptx"]
    second = tilegen.compile(data, "sm_90")
    assert second.cache_hit and second.cubin == first.cubin and second.ptx == first.ptx
    assert "read" not in second.timings  # nothing was recompiled
    other = tilegen.compile(data, "sm_90", opt_level=2)
    assert not other.cache_hit and other.cache_key != first.cache_key
    arch = tilegen.compile(data, "sm_80")
    assert arch.cache_key not in (first.cache_key, other.cache_key)
    assert ".target sm_80" in arch.ptx
    off = tilegen.compile(data, "sm_90", cache=False)
    assert off.cache_key is None and not off.cache_hit


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
    monkeypatch.setattr(api, "_FINGERPRINT", None)
    monkeypatch.setattr(api, "_source_roots", lambda: [tmp_path])
    (tmp_path / "a.py").write_text("x = 1\n")
    one = api.build_fingerprint()
    monkeypatch.setattr(api, "_FINGERPRINT", None)
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
    # the CLI runs no optimizer; -O0 is the same pipeline through the API
    assert ptx.read_text() == tilegen.compile(OUT / "vec_add.tileirbc", opt_level=0).ptx
