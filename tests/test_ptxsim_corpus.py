"""tileiras's own PTX for every cuTile corpus kernel and every captured target (sm_80, sm_90,
sm_100, sm_120; sm_89 for fp8), run in the SIMT simulator, must reproduce the corpus's expected
outputs. The PTX is captured from tileiras by tests/ptx_corpus.py (never committed); ptxas
assembles each text for its target first (with the options tileiras gave it) and the
simulator's load-time checks accept it, so nothing runs that ptxas refuses. Tensor maps (box,
swizzle) come from each capture's host object."""

from __future__ import annotations

import io

import pytest

import ptx_corpus
from ptx_corpus import tileiras_ptx  # noqa: F401  (fixture)
from tilegen.runtime.ptx.launch import run_ptx


def _cases() -> list:
    return [
        pytest.param(k, arch, id=f"{k['name']}.{arch}")
        for k in ptx_corpus.kernels()
        for arch in (*ptx_corpus.TARGETS, *ptx_corpus.EXTRA.get(k["name"], ()))
        if not ptx_corpus.tileiras_refuses(k, arch)
    ]


@pytest.mark.parametrize("kernel,arch", _cases())
def test_tileiras_ptx_matches_expected(tileiras_ptx, kernel: dict, arch: str) -> None:  # noqa: F811
    ptx, info = ptx_corpus.captured(kernel["name"], arch)
    assert ptx is not None, f"tileiras did not compile it: {info['stderr']}"
    args, names, data = ptx_corpus.arguments(kernel)
    printed = io.StringIO()
    outs = run_ptx(
        ptx.read_text(),
        args,
        data["grid"],
        file=ptx.name,
        stdout=printed,
        tensor_maps=info.get("tensor_maps"),
        assemble=True,
        ptxas_flags=tuple(info.get("ptxas_flags", ())),
    )
    if kernel.get("expected_stdout") is not None:
        assert printed.getvalue() == kernel["expected_stdout"]
    ptx_corpus.check_outputs(kernel, names, args, outs, data)


STRICT = ["matmul_f16.sm_90", "flash_attention.sm_100"]  # wgmma + TMA; tcgen05 + TMEM


@pytest.mark.parametrize("case", STRICT)
def test_strict_async_mode_accepts_tileiras_pipelines(
    tileiras_ptx, case: str
) -> None:  # noqa: F811
    # NVIDIA's TMA / mbarrier / wgmma / tcgen05 pipelines are correctly synchronised: the
    # strict mode (operations in flight until forced, every access checked) must agree
    name, arch = case.split(".")
    kernel = next(k for k in ptx_corpus.kernels() if k["name"] == name)
    ptx, info = ptx_corpus.captured(name, arch)
    args, names, data = ptx_corpus.arguments(kernel)
    outs = run_ptx(
        ptx.read_text(),
        args,
        data["grid"],
        file=ptx.name,
        tensor_maps=info.get("tensor_maps"),
        ptxas_flags=tuple(info.get("ptxas_flags", ())),
        strict_async=True,
    )
    ptx_corpus.check_outputs(kernel, names, args, outs, data)
