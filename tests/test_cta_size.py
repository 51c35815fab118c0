"""runtime/passes/cta_size.choose_num_warps must reproduce tileiras's CTA size (``.reqntid``) for
every cuTile corpus kernel: from tileiras's own PTX in the corpus (sm_90 for all kernels, sm_80 /
sm_100 for a few) and, where tileiras is installed, from the cubins it builds for the other
targets (EIATTR_REQNTID)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tilegen.runtime.passes.cta_size import choose_num_warps, tma_load_reason, uses_tma

ROOT = Path(__file__).resolve().parents[1]
from paths import CORPUS  # ../shared or $TILEGEN_SHARED

OUT = CORPUS / "out"
ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")
NEGATIVE = {"uint_floordiv_bug"}  # a conforming compiler refuses it


def _kernels() -> list[str]:
    if not OUT.exists():
        return []
    return sorted(
        p.stem for p in OUT.glob("*.tileirbc") if ".v13_1" not in p.name and p.stem not in NEGATIVE
    )


_FUNCS: dict = {}


def _func(kernel: str, arch: str):
    """The kernel's nv_tileaa.func for ``arch`` (tilegen's conversion)."""
    key = (kernel, arch)
    if key not in _FUNCS:
        from tilegen.runtime.driver import compile_module, options_for
        from tilegen.runtime.interp.api import load_module

        module = load_module(OUT / f"{kernel}.tileirbc")
        options = options_for(arch, opt_level=0, verify=False)
        root = compile_module(module, options, "convert").module
        funcs = [op for op in root.walk() if op.name == "nv_tileaa.func"]
        assert len(funcs) == 1, funcs
        _FUNCS[key] = funcs[0]
    return _FUNCS[key]


def _ptx_threads(path: Path) -> int:
    m = re.search(
        r"\.(?:reqntid|maxntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", path.read_text()
    )
    assert m, f"{path.name}: no .reqntid/.maxntid"
    n = 1
    for g in m.groups():
        n *= int(g or 1)
    return n


def _corpus_ptx() -> list:
    out = []
    for k in _kernels():
        for ptx in sorted((OUT / "ptx").glob(f"{k}.sm_*.ptx")):
            out.append(
                pytest.param(k, ptx.name.split(".")[1], ptx, id=f"{k}.{ptx.name.split('.')[1]}")
            )
    return out


@pytest.mark.skipif(not OUT.exists(), reason="cuTile corpus not present")
@pytest.mark.parametrize("kernel,arch,ptx", _corpus_ptx())
def test_matches_tileiras_ptx(kernel: str, arch: str, ptx: Path) -> None:
    assert 32 * choose_num_warps(_func(kernel, arch)) == _ptx_threads(ptx)


def test_corpus_has_both_sizes() -> None:
    """The sm_90 corpus PTX has both 128- and 256-thread kernels, so the test above can fail."""
    if not OUT.exists():
        pytest.skip("cuTile corpus not present")
    sizes = {_ptx_threads(p) for p in (OUT / "ptx").glob("*.sm_90.ptx")}
    assert sizes == {128, 256}


def _tileiras() -> str | None:
    for cand in Path(sys.prefix).glob("lib/python3*/site-packages/nvidia/cu13/bin/tileiras"):
        return str(cand)
    return None


def _tileiras_cases() -> list:
    if _tileiras() is None:
        return []
    out = []
    for k in _kernels():
        have = {p.name.split(".")[1] for p in (OUT / "ptx").glob(f"{k}.sm_*.ptx")}
        for arch in ARCHS:
            if arch not in have:
                out.append(pytest.param(k, arch, id=f"{k}.{arch}"))
    return out


@pytest.mark.skipif(_tileiras() is None, reason="tileiras (nvidia-cuda-tileiras) not installed")
@pytest.mark.parametrize("kernel,arch", _tileiras_cases())
def test_matches_tileiras_cubin(kernel: str, arch: str, tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from cubin_info import only_kernel

    out = tmp_path / "k.cubin"
    p = subprocess.run(
        [_tileiras(), f"--gpu-name={arch}", "-o", str(out), str(OUT / f"{kernel}.tileirbc")],
        capture_output=True,
        text=True,
    )
    if p.returncode != 0:
        pytest.skip(f"tileiras refuses {kernel} for {arch}: {p.stderr.strip()[:200]}")
    threads = only_kernel(out.read_bytes()).threads
    assert threads is not None
    assert 32 * choose_num_warps(_func(kernel, arch)) == threads


def test_sm80_never_uses_tma() -> None:
    if not OUT.exists():
        pytest.skip("cuTile corpus not present")
    assert not uses_tma(_func("matmul_f16", "sm_80"))
    assert uses_tma(_func("matmul_f16", "sm_90"))
    assert choose_num_warps(_func("matmul_f16", "sm_90"), sm=80) == 4


def test_refusal_reasons() -> None:
    """softmax pads with -inf (not a TMA fill); newer_ops' last load is only 4-byte aligned."""
    if not OUT.exists():
        pytest.skip("cuTile corpus not present")

    def reasons(kernel):
        f = _func(kernel, "sm_90")
        return [tma_load_reason(op) for op in f.walk() if op.name == "nv_tileaa.tiled_load"]

    assert reasons("softmax") == [
        "software-implemented TMA padding is not profitable for this tile"
    ]
    r = reasons("newer_ops")
    assert r.count(None) == 3 and "base pointer not 16-byte aligned" in r
    assert not uses_tma(_func("vec_add", "sm_90"))  # TMA-able loads, but nothing staged


def test_explicit_hint_wins() -> None:
    if not OUT.exists():
        pytest.skip("cuTile corpus not present")
    from tilegen.runtime.attributes import IntegerAttr
    from tilegen.runtime.types import IntegerType

    f = _func("vec_add", "sm_90")
    saved = dict(f.attributes)
    try:
        f.set_attr("tt.num_warps", IntegerAttr(2, IntegerType(32)))
        assert choose_num_warps(f) == 2
        assert choose_num_warps(f, respect_hint=False) == 4
    finally:
        f.attributes.clear()
        f.attributes.update(saved)
