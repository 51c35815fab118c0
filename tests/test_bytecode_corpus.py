"""Reader and writer against real cuTile bytecode (13.4 and 13.1) and NVIDIA's tools as oracles."""

import os

import pytest

from bytecode_helpers import (
    CORPUS_FILES,
    NEGATIVE,
    fingerprint,
    nonblank,
    nvidia_tool,
    run_tool,
    stem,
)
from tilegen.runtime.bytecode import read_bytecode, read_version, write_bytecode

TILEIRDISASM = nvidia_tool("tileirdisasm")
TILEIRAS = nvidia_tool("tileiras")

pytestmark = pytest.mark.skipif(not CORPUS_FILES, reason="cuTile corpus not available")


def _load(path):
    data = open(path, "rb").read()
    return data, read_version(data), read_bytecode(data, path)


def test_corpus_has_both_versions():
    versions = {read_version(open(p, "rb").read()) for p in CORPUS_FILES}
    assert {"13.1", "13.4"} <= versions


@pytest.mark.parametrize("path", CORPUS_FILES, ids=os.path.basename)
def test_read_write_read_is_identity(path):
    data, version, module = _load(path)
    assert sum(1 for op in module.walk() if op.name == "cuda_tile.entry") >= 1
    out = write_bytecode(module, version)
    assert read_version(out) == version
    again = read_bytecode(out, "rewritten")
    assert fingerprint(again) == fingerprint(module)
    # our own output is a fixed point of read -> write
    assert write_bytecode(again, version) == out


@pytest.mark.skipif(TILEIRDISASM is None, reason="tileirdisasm not installed")
def test_tileirdisasm_of_rewritten_bytes_matches_original(tmp_path):
    mismatches = []
    for path in CORPUS_FILES:
        data, version, module = _load(path)
        ours = tmp_path / os.path.basename(path)
        ours.write_bytes(write_bytecode(module, version))
        a, b = run_tool(TILEIRDISASM, path), run_tool(TILEIRDISASM, str(ours))
        if (a.returncode, nonblank(a.stdout)) != (b.returncode, nonblank(b.stdout)):
            mismatches.append(os.path.basename(path))
        elif stem(path) not in NEGATIVE:
            assert a.returncode == 0 and len(nonblank(b.stdout)) > 3
    assert mismatches == []


@pytest.mark.skipif(TILEIRAS is None, reason="tileiras not installed")
@pytest.mark.parametrize("name", ["vec_add", "softmax.v13_1", "flash_attention", "control_if"])
def test_tileiras_compiles_rewritten_bytes(tmp_path, name):
    path = [p for p in CORPUS_FILES if os.path.basename(p) == name + ".tileirbc"]
    if not path:
        pytest.skip(f"{name} not in corpus")
    data, version, module = _load(path[0])
    ours = tmp_path / "k.tileirbc"
    ours.write_bytes(write_bytecode(module, version))
    r = run_tool(
        TILEIRAS, "--gpu-name=sm_90", str(ours), "-o", str(tmp_path / "k.cubin"), timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "k.cubin").stat().st_size > 0


@pytest.mark.parametrize(
    "path", [p for p in CORPUS_FILES if p.endswith(".v13_1.tileirbc")][:6], ids=os.path.basename
)
def test_upgrade_13_1_to_13_4_keeps_the_ir(path):
    _, _, module = _load(path)
    up = read_bytecode(write_bytecode(module, "13.4"), "up")
    assert read_version(write_bytecode(up, "13.4")) == "13.4"
    assert [op.name for op in up.walk()] == [op.name for op in module.walk()]


@pytest.mark.skipif(TILEIRDISASM is None, reason="tileirdisasm not installed")
@pytest.mark.parametrize("name", ["vec_add", "matmul_f16", "softmax", "atomics"])
def test_downgrade_13_4_to_13_1_is_accepted_by_nvidia(tmp_path, name):
    path = [p for p in CORPUS_FILES if os.path.basename(p) == name + ".tileirbc"]
    if not path:
        pytest.skip(f"{name} not in corpus")
    _, version, module = _load(path[0])
    assert version == "13.4"
    ours = tmp_path / "k.tileirbc"
    ours.write_bytes(write_bytecode(module, "13.1"))
    assert read_version(ours.read_bytes()) == "13.1"
    a, b = run_tool(TILEIRDISASM, path[0]), run_tool(TILEIRDISASM, str(ours))
    assert b.returncode == 0, b.stderr
    assert nonblank(a.stdout) == nonblank(b.stdout)


@pytest.mark.skipif(TILEIRDISASM is None, reason="tileirdisasm not installed")
def test_13_5_records_match_nvidia(tmp_path):
    """The 13.5 function-record / DISubprogram layout (bytecode_13_4.md sec. 9), checked against
    tileirdisasm 13.5 with debug info."""
    from tilegen.runtime.bytecode.writer import _Writer

    checked = 0
    for path in CORPUS_FILES[:12]:
        if stem(path) in NEGATIVE:
            continue
        ours = tmp_path / "k.tileirbc"
        ours.write_bytes(_Writer("13.5").write(_load(path)[2]))
        a, b = run_tool(TILEIRDISASM, "-g", path), run_tool(TILEIRDISASM, "-g", str(ours))
        assert b.returncode == 0 and a.stdout == b.stdout, path
        checked += 1
    assert checked >= 8
