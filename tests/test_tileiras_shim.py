"""tilegen-tileiras: tileiras's command line, messages and exit codes (tilegen/tools/tileiras.py),
and ``tilegen install-shim``. Where NVIDIA's tileiras is installed every case is also run through
it and the exit codes must agree (except the deviations documented in docs/tileiras_shim.md)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tilegen import api
from tilegen.tools import tileiras as shim

from paths import CORPUS_OUT as OUT  # ../shared or $TILEGEN_SHARED

needs_corpus = pytest.mark.skipif(not OUT.is_dir(), reason="cuTile corpus not present")
ELF_MAGIC = b"\x7fELF"


def _nvidia_tileiras():
    for base in {sys.prefix, sys.exec_prefix}:
        for cand in Path(base).glob("lib/python3*/site-packages/nvidia/cu13/bin/tileiras"):
            return str(cand)
    return shutil.which("tileiras")


NVIDIA = _nvidia_tileiras()


@pytest.fixture(autouse=True)
def _cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.tileirbc").write_bytes(b"garbage\n")
    (tmp_path / "empty.tileirbc").write_bytes(b"")
    (tmp_path / "adir").mkdir()
    if OUT.is_dir():
        (tmp_path / "trunc.tileirbc").write_bytes((OUT / "vec_add.tileirbc").read_bytes()[:100])


def _run(argv, capsys):
    rc = shim.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


V = str(OUT / "vec_add.tileirbc")
#: fp8 has no sm_80 support: tileiras and tilegen must both refuse it (exit 5), now and later
FP8 = str(OUT / "matmul_fp8.tileirbc")
INVALID = str(OUT / "uint_floordiv_bug.tileirbc")

#: (argv, exit code, stderr regex); the exit codes are tileiras 13.5's (checked below)
CASES = [
    (["--gpu-name=sm_90", V, "-o", "a.cubin"], 0, r"^$"),
    (["--gpu-name", "sm_90", V, "-o", "a.cubin"], 0, r"^$"),
    (["-gpu-name=sm_90", "-O2", V, "--output-file", "a.cubin"], 0, r"^$"),
    (["--arch=sm_80", "-O0", "-g", V, "-o", "a.cubin"], 0, r"^$"),
    (["--gpu-name=sm_90", "--opt-level", "1", "--lineinfo", V, "-o", "a.cubin"], 0, r"^$"),
    (["--gpu-name=sm_90", "--host-arch=x86_64", "--host-os=linux", V, "-o", "a.cubin"], 0, r"^$"),
    (["--bogus", V], 1, r"Unknown command line argument '--bogus'"),
    (["--gpu-name=sm_99", V], 1, r"for the --gpu-name option: Cannot find option named 'sm_99'"),
    (["--gpu-name=sm_90", "-O", "2", V], 1, r"for the -O option: requires a value"),
    (["--gpu-name=sm_90", "--opt-level=x", V], 1, r"'x' value invalid for integer argument"),
    (["--gpu-name=sm_90", "-oa.cubin", V], 1, r"Unknown command line argument '-oa.cubin'"),
    (["--gpu-name=sm_90", "--preview=foo", V], 1, r"unknown preview feature 'foo'"),
    (["--gpu-name=sm_90"], 1, r"error: no input file provided"),
    (["--gpu-name=sm_90", V, V], 1, r"Too many positional arguments"),
    (["--gpu-name=sm_90", "missing.tileirbc"], 1, r"^missing.tileirbc: error: unable to read input file: No such file or directory$"),
    (["--gpu-name=sm_90", "-", "-o", "a.cubin"], 1, r"^-: error: unable to read input file: No such file"),
    (["--gpu-name=sm_90", "adir", "-o", "a.cubin"], 1, r"^adir: error: unable to read input file: Is a directory$"),
    ([V], 2, r"^error: .*--gpu-name"),
    (["--gpu-name=sm_90", "-O5", V], 2, r"error: invalid optimization level: 5"),
    (["--gpu-name=sm_90", "-O-1", V], 2, r"error: invalid optimization level: -1"),
    (["--gpu-name=sm_90", "-g", V], 2, r"optimized debugging is currently not supported"),
    (["--gpu-name=sm_90", V, "-o", "/nonexistent/dir/a.cubin"], 2, r"cannot open output file"),
    (["--gpu-name=sm_90", "--sanitize=memcheck", V, "-o", "a.cubin"], 0, r"^$"),
    (["--gpu-name=sm_90", "--preview=simt", V, "-o", "a.cubin"], 2, r"not supported by tilegen"),
    (["--gpu-name=sm_90", "bad.tileirbc", "-o", "a.cubin"], 3, r"^bad.tileirbc: error: .*magic"),
    (["--gpu-name=sm_90", "trunc.tileirbc", "-o", "a.cubin"], 3, r"^trunc.tileirbc: error: section length 137 exceeds remaining data size 85 \(at byte offset 15\)$"),
    (["--gpu-name=sm_90", "empty.tileirbc", "-o", "a.cubin"], 3, r"^empty.tileirbc: error: input does not correspond to Tile IR bytecode$"),
    (["--gpu-name=sm_90", INVALID, "-o", "a.cubin"], 3, r"^kernels.py:\d+:\d+: error: 'cuda_tile.divi'"),
    (["--gpu-name=sm_80", FP8, "-o", "a.cubin"], 5, r"^kernels.py:\d+:\d+: error: .*\nerror: failed to compile"),
]  # fmt: skip


@needs_corpus
@pytest.mark.parametrize("argv, code, stderr", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_exit_codes_and_messages(argv, code, stderr, capsys, tmp_path):
    rc, out, err = _run(argv, capsys)
    assert rc == code, err
    assert re.search(stderr, err, re.M), err
    assert "Traceback" not in err
    wrote = (tmp_path / "a.cubin").exists()
    assert wrote == (code == 0 and "a.cubin" in argv)
    if wrote:
        assert (tmp_path / "a.cubin").read_bytes()[:4] == ELF_MAGIC


@needs_corpus
@pytest.mark.skipif(NVIDIA is None, reason="NVIDIA tileiras not installed: nothing to compare")
@pytest.mark.parametrize("argv, code, stderr", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_exit_codes_match_nvidia_tileiras(argv, code, stderr):
    if "--preview=simt" in argv:
        pytest.skip("deliberately refused by tilegen (docs/tileiras_shim.md)")
    p = subprocess.run([NVIDIA, *argv], capture_output=True, timeout=120)
    assert p.returncode == code, p.stderr.decode()


@needs_corpus
def test_mlir_text_is_accepted(capsys, tmp_path):
    """Deviation: tileiras rejects text (exit 3); tilegen compiles it like its bytecode."""
    rc, _, err = _run(["--gpu-name=sm_90", str(OUT / "vec_add.mlir"), "-o", "t.cubin"], capsys)
    assert rc == 0, err
    rc, _, err = _run(["--gpu-name=sm_90", V, "-o", "b.cubin"], capsys)
    assert rc == 0, err
    assert (tmp_path / "t.cubin").read_bytes() == (tmp_path / "b.cubin").read_bytes()


@needs_corpus
def test_default_output_is_elf_o(capsys, tmp_path):
    rc, _, err = _run(["--gpu-name=sm_90", V], capsys)
    assert rc == 0, err
    assert (tmp_path / shim.DEFAULT_OUTPUT).read_bytes()[:4] == ELF_MAGIC


@needs_corpus
def test_remarks_file_for_cutile(capsys, tmp_path):
    argv = ["--gpu-name=sm_90", V, "-o", "a.cubin", "--remark-format=yaml", "--remarks=all"]
    rc, _, err = _run(argv + ["--remarks-output-file=r.yaml"], capsys)
    assert rc == 0, err
    assert (tmp_path / "r.yaml").read_text() == ""
    rc, _, err = _run(["--gpu-name=sm_90", V, "-o", "b.cubin", "--remarks=all"], capsys)
    assert rc == 0 and not (tmp_path / "tileir_remarks.yaml").exists()


def test_version_and_list_versions(capsys):
    rc, out, _ = _run(["--version"], capsys)
    assert rc == 0 and out == api.compiler_version()
    m = re.search(r"Cuda compilation tools,\s*release\s*([^,\n]+),\s*V([^\s\n]+)", out)
    assert m and m.group(1) == api.newest_bytecode_version() and "tilegen" in m.group(2)
    rc, out, _ = _run(["--list-versions"], capsys)
    from tilegen.runtime.bytecode.layouts import PRODUCTION_READ_VERSIONS

    assert rc == 0 and out.split() == PRODUCTION_READ_VERSIONS
    if NVIDIA is not None:
        theirs = subprocess.run([NVIDIA, "--list-versions"], capture_output=True, text=True)
        assert set(theirs.stdout.split()) <= set(out.split()), "tileiras reads a newer bytecode"


def test_cutile_reads_the_version():
    cli = pytest.importorskip("cutile_cache._cli", reason="cuda-tile not installed")
    assert cli._format_compiler_version(api.compiler_version()).startswith("tileiras ")


def test_help_lists_every_option(capsys):
    rc, out, _ = _run(["--help"], capsys)
    assert rc == 0
    for name in shim.OPTIONS:
        assert name in out
    assert shim.GPU_NAMES == api.GPU_NAMES


def test_cutile_version_probe(capsys, tmp_path):
    """cuTile compiles an empty module per bytecode version for sm_120 to find the newest one
    (``_get_max_supported_bytecode_version``); every version it knows must pass."""
    bc = pytest.importorskip("cuda.tile._bytecode", reason="cuda-tile not installed")
    from cuda.tile._compile import _SUPPORTED_VERSIONS

    for version in _SUPPORTED_VERSIONS:
        buf = bytearray()
        with bc.write_bytecode(num_functions=0, buf=buf, version=version):
            pass
        (tmp_path / "probe.bc").write_bytes(bytes(buf))
        rc, _, err = _run(["probe.bc", "-o", "probe.cubin", "--gpu-name", "sm_120"], capsys)
        assert rc == 0, (version, err)
        assert (tmp_path / "probe.cubin").read_bytes()[:4] == ELF_MAGIC


@needs_corpus
def test_install_shim_and_console_script(tmp_path):
    from tilegen.cli import main

    assert main(["install-shim", str(tmp_path / "bin")]) == 0
    launcher = tmp_path / "bin" / "tileiras"
    assert os.access(launcher, os.X_OK)
    assert main(["install-shim", str(tmp_path / "bin")]) == 1  # exists, no --force
    assert main(["install-shim", "--force", str(tmp_path / "bin")]) == 0
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    found = shutil.which("tileiras", path=env["PATH"])
    assert found == str(launcher)
    p = subprocess.run([found, "--version"], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and p.stdout == api.compiler_version()
    p = subprocess.run([found, "--gpu-name=sm_90", V, "-o", "x.cubin"], env=env, cwd=tmp_path)
    assert p.returncode == 0 and (tmp_path / "x.cubin").read_bytes()[:4] == ELF_MAGIC
    p = subprocess.run([found, "--gpu-name=sm_80", FP8], capture_output=True, text=True)
    assert p.returncode == 5 and "Traceback" not in p.stderr
    assert re.search(r"^kernels.py:\d+:\d+: error: ", p.stderr, re.M), p.stderr
    script = Path(sys.executable).parent / "tilegen-tileiras"
    if script.exists():  # the console script (pip install -e . after pyproject changes)
        p = subprocess.run([str(script), "--bogus"], capture_output=True, text=True)
        assert p.returncode == 1 and "tilegen-tileiras: Unknown command line argument" in p.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_is_refused_without_blocking(tmp_path):
    """tileiras blocks on a FIFO; tilegen refuses every file that is not a regular file."""
    os.mkfifo(tmp_path / "fifo")
    p = subprocess.run(
        [sys.executable, "-m", "tilegen.tools.tileiras", "--gpu-name=sm_90", "fifo"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert p.returncode == 1
    assert p.stderr == "fifo: error: unable to read input file: not a regular file\n"


@needs_corpus
def test_variant_targets_are_accepted(capsys, tmp_path):
    """Deviation: tileiras has no a/f names; tilegen's one target rule accepts them."""
    rc, _, err = _run(["--gpu-name=sm_90a", V, "-o", "a.cubin"], capsys)
    assert rc == 0, err
    rc, _, err = _run(["--gpu-name=sm_75", V, "-o", "a.cubin"], capsys)
    assert rc == 1 and "Cannot find option named 'sm_75'! (accepted: sm_80, " in err
    assert err.count("\n") == 1


def test_empty_module_compiles_like_tileiras(capsys, tmp_path):
    from tilegen.runtime.asm import parse_module
    from tilegen.runtime.bytecode import write_bytecode

    data = write_bytecode(parse_module("cuda_tile.module @m {}", no_implicit_module=True), "13.4")
    (tmp_path / "e.tileirbc").write_bytes(data)
    rc, _, err = _run(["--gpu-name=sm_90", "e.tileirbc", "-o", "e.cubin"], capsys)
    assert rc == 0, err
    assert (tmp_path / "e.cubin").read_bytes()[:4] == ELF_MAGIC
    if NVIDIA is not None:
        p = subprocess.run(
            [NVIDIA, "--gpu-name=sm_90", "e.tileirbc", "-o", "n.cubin"], cwd=tmp_path
        )
        assert p.returncode == 0
