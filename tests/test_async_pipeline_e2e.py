"""The async path in the real compile pipeline (docs/pipelines.md): the rule and its recorded
decisions (driver stage ``async``, ``tilegen compile --emit=async-plan``), the typed options that
switch it off, and the fallback (today's code, unchanged).

What is not here yet: PTX from the async path itself - the emitter does not lower it
(``runtime.passes.async_rule.LOWERED`` is empty; docs/pipelines.md section 7), which
:func:`test_no_kernel_claims_the_async_path_before_the_emitter_lowers_it` pins.
"""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest

from paths import CORPUS_OUT, needs_shared
from tilegen.runtime import driver
from tilegen.runtime.diagnostics import CompileError
from tilegen.runtime.options import CompileOptions
from tilegen.runtime.passes import async_rule

pytestmark = needs_shared(CORPUS_OUT)


def _plan(kernel: str, target: str, **fields) -> async_rule.AsyncDecision:
    options = CompileOptions(target=target, **fields)
    c = driver.compile_source(CORPUS_OUT / f"{kernel}.tileirbc", options, until="async")
    assert c.stages[-1] == "async"
    (d,) = c.async_plan
    assert d.kernel.startswith(kernel) and d.target == target
    return d


@pytest.mark.parametrize("target,mma", [("sm_90a", "wgmma"), ("sm_100a", "tcgen05")])
def test_matmul_f16_is_eligible_with_its_plan(target, mma):
    d = _plan("matmul_f16", target)
    assert d.eligible and d.mma == mma
    assert d.tile == (64, 64, 32) and d.elements == "f16 x f16 -> f32"
    # 64x32 + 32x64 f16 per stage; 8 stages (the pass's cap) need dynamic shared memory
    assert (d.stage_bytes, d.stages, d.dynamic_smem) == (8192, 8, True)
    # the kernel's 4 warps consume, one producer warp group gives its registers away
    assert (d.consumer_warps, d.producer_warps, d.producer_regs, d.consumer_regs) == (
        4,
        4,
        32,
        256,
    )


@pytest.mark.parametrize(
    "kernel,target,reason",
    [
        ("matmul_f16", "sm_80", "sm_80 has neither wgmma nor tcgen05"),
        ("matmul_f16", "sm_120", "sm_120 has neither wgmma nor tcgen05"),
        ("matmul_f64", "sm_90a", "f64 x f64 -> f64 dots have no wgmma instruction"),
        ("matmul_f64", "sm_100a", "f64 x f64 -> f64 dots have no tcgen05 instruction"),
        ("batched_matmul", "sm_90a", "did not lay this 32x32x32 dot out for wgmma (mma.sync"),
        (
            "batched_matmul",
            "sm_100a",
            "tcgen05 (cta_group::1) takes M 64 or 128, the tile has M 32",
        ),
        ("flash_attention", "sm_90a", "does not hold exactly one dot directly"),
    ],
)
def test_what_falls_back_and_why(kernel, target, reason):
    d = _plan(kernel, target)
    assert not d.eligible and not d.taken
    assert reason in d.reason
    assert reason in d.line()


@pytest.mark.parametrize(
    "fields,reason",
    [
        ({"use_tma": False}, "use_tma is off (--no-tma)"),
        ({"warp_specialize": False}, "warp_specialize is off (--no-warp-specialize)"),
        ({"pipelining": False}, "K-loop pipelining is off (--no-pipeline)"),
        ({"num_stages": 1}, "num_stages is 1"),
        ({"use_wgmma": False}, "use_wgmma is off (--no-wgmma)"),
    ],
)
def test_options_switch_the_path_off(fields, reason):
    d = _plan("matmul_f16", "sm_90a", **fields)
    assert (d.eligible, d.reason) == (False, reason) or reason in d.reason
    assert not d.eligible


def test_tf32_operands_through_their_conversion_qualify():
    d = _plan("matmul_tf32", "sm_90a")
    assert d.eligible and d.elements == "tf32 x tf32 -> f32" and d.stage_bytes == 16384


def test_unaligned_strides_fall_back():
    # the same matmul with A's row stride known only to be even: TMA cannot describe it
    text = (CORPUS_OUT / "matmul_f16.mlir").read_text()
    for needle in ("assume div_by<8>, %arg3 ", "assume div_by<8>, %assume_assume "):
        assert needle in text
        text = text.replace(needle, needle.replace("<8>", "<2>"))
    c = driver.compile_source(text, CompileOptions(target="sm_90a"), "m.mlir", until="async")
    (d,) = c.async_plan
    assert not d.eligible
    assert "not known to be a multiple of 16 bytes" in d.reason


def test_no_kernel_claims_the_async_path_before_the_emitter_lowers_it():
    assert async_rule.LOWERED == frozenset()
    d = _plan("matmul_f16", "sm_90a")
    assert d.eligible and not d.taken
    assert "the emitter does not lower the wgmma async path yet" in d.reason


def test_fallback_ptx_is_todays_path_unchanged():
    src = CORPUS_OUT / "matmul_f16.tileirbc"
    on = driver.compile_source(src, CompileOptions(target="sm_90a"), until="ptx").ptx
    off = driver.compile_source(src, CompileOptions(target="sm_90a", use_tma=False), until="ptx")
    assert on == off.ptx
    assert "cp.async.bulk.tensor" not in on and "wgmma.mma_async" in on


def test_options_are_typed_and_in_the_cache_key():
    base = CompileOptions(target="sm_90a")
    for name in ("use_tma", "warp_specialize"):
        assert getattr(base, name) is True
        other = CompileOptions(target="sm_90a", **{name: False})
        assert other.fingerprint() != base.fingerprint()
        assert f"{name}=False" in other.fingerprint()
        with pytest.raises(CompileError) as e:
            CompileOptions(**{name: "no"})
        assert e.value.exit_code == 1
        assert f"{name} must be True or False" in str(e.value.diagnostics[0].message)


def test_cli_emits_the_async_plan():
    from tilegen.cli import main

    out = io.StringIO()
    argv = [
        "compile",
        str(CORPUS_OUT / "matmul_f16.tileirbc"),
        "--gpu-name=sm_90a",
        "--emit=async-plan",
        "--no-warp-specialize",
    ]
    buf = io.BytesIO()

    class _Out:
        buffer = buf

        def write(self, s):
            out.write(s)

        def flush(self):
            pass

    with redirect_stdout(_Out()):
        assert main(argv) == 0
    text = buf.getvalue().decode()
    assert text.startswith("// async: matmul_f16")
    assert "[sm_90a]: today's path: warp_specialize is off (--no-warp-specialize)" in text
