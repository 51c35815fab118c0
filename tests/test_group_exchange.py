"""Cross-warp reductions inside loops (runtime/codegen/exchange.GroupExchange, reduce.py;
docs/pipelines.md section 52): a double-buffered region of the exchange's own and one barrier
of the warps that share the rows, where the shared scratch took a CTA-wide barrier before the
writes and another after them. The simulator's strict mode (warp-granular happens-before)
checks the orders: a planted missing barrier is a read-after-write race, a planted single
buffer a write-after-read race; the sm_100 attention's pairs of warps take named barriers of
their own (the simulator runs barriers named per warp)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tilegen.runtime import driver
from tilegen.runtime.codegen import exchange
from tilegen.runtime.options import CompileOptions
from tilegen.runtime.ptx.launch import run_ptx
from tilegen.runtime.ptx.sim.cta import PtxSimError
from test_codegen_control import REDUCE_IN_LOOP, reduce_in_loop_expected
from test_async_general import _attention_problem, attention  # noqa: F401 (a fixture)
from test_async_pipeline_e2e import needs_ptxas


def _reduce_in_loop(n: int):
    ptx = driver.compile_source(REDUCE_IN_LOOP, CompileOptions(target="sm_90"), "k.mlir").ptx
    x = np.random.default_rng(3).integers(-4, 4, 128).astype(np.float32)
    args = [x, np.zeros(128, np.float32), np.array(n, np.int32)]
    return ptx, args, reduce_in_loop_expected(x, n).astype(np.float32)


def _loop_body(ptx: str) -> str:
    """The text from the loop's first label to its back edge."""
    return ptx[ptx.index("st.shared") : ptx.rindex("bra ")]


@needs_ptxas
def test_a_reduction_in_a_loop_takes_one_barrier_an_iteration():
    ptx, args, want = _reduce_in_loop(3)
    # two buffers (4 warps' partials each, the smallest taken being 1 KB), nothing else
    assert "__tilegen_xchg0[2048]" in ptx and "__tilegen_xchg1" not in ptx
    assert _loop_body(ptx).count("bar.sync") == 1
    out = run_ptx(ptx, args, (1, 1, 1), strict_async=True)
    np.testing.assert_array_equal(out[1], want)


@needs_ptxas
def test_one_buffer_is_a_write_after_read_race(monkeypatch):
    """Planted: the buffers no longer alternate. The next iteration's partial overwrites bytes
    another warp read, with no barrier between."""
    monkeypatch.setattr(exchange.GroupExchange, "done", lambda self: None)
    ptx, args, _ = _reduce_in_loop(3)
    with pytest.raises(PtxSimError, match=r"overwrites shared byte .* which warp \d read"):
        run_ptx(ptx, args, (1, 1, 1), strict_async=True)


@needs_ptxas
def test_sm100_attention_pairs_sync_on_their_own_barriers(attention):
    """sm_100a attention: 8 consumer warps, warps w and w + 4 hold the two halves of each TMEM
    row. Each of the softmax's two row reductions is one `bar.sync id, 64` of the pair (ids 4-7);
    the loop's one CTA-wide barrier is the P store before the MMA's issue."""
    ptx = driver.compile_source(attention, CompileOptions(target="sm_100a")).ptx
    pairs = re.findall(r"bar\.sync %r\d+, 64;", ptx)
    assert len(pairs) >= 2
    # every reduction of the pairs shares one region: 128 rows x 2 warps x 4 bytes, twice
    assert "__tilegen_xchg0[2048]" in ptx and "__tilegen_xchg1" not in ptx
    assert "add.s32" in ptx and ", 4;\n" in ptx  # ids from 4 (exchange.GROUP_BARRIER)
    for heads, seq in ((1, 256), (2, 200)):
        args, ref, grid = _attention_problem(heads, seq)
        out = run_ptx(ptx, args, grid, strict_async=True)
        np.testing.assert_allclose(out[3].astype(np.float64), ref, rtol=2e-2, atol=2e-2)


@needs_ptxas
def test_a_missing_pair_barrier_is_a_read_after_write_race(monkeypatch, attention):
    monkeypatch.setattr(exchange.GroupExchange, "sync", lambda self: None)
    ptx = driver.compile_source(attention, CompileOptions(target="sm_100a")).ptx
    args, _, grid = _attention_problem(1, 256)
    with pytest.raises(PtxSimError, match=r"reads shared byte .* with no barrier between them"):
        run_ptx(ptx, args, grid, strict_async=True)


_BARRIERS = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out) .reqntid 128, 1, 1
{{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    .shared .align 4 .b32 s[128];
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, {shift};
    and.b32 %r2, %r2, 1;
    add.s32 %r2, %r2, 4;
    shl.b32 %r3, %r1, 2;
    mov.u32 %r4, s;
    add.s32 %r4, %r4, %r3;
    st.shared.u32 [%r4], %r1;
    bar.sync %r2, 64;
    xor.b32 %r5, %r3, 128;
    mov.u32 %r6, s;
    add.s32 %r6, %r6, %r5;
    ld.shared.u32 %r7, [%r6];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd1, %rd1, %rd2;
    st.global.u32 [%rd1], %r7;
    ret;
}}
"""


def test_the_simulator_runs_barriers_named_per_warp():
    """Warps 0 and 2 meet at barrier 4, warps 1 and 3 at barrier 5; each thread then reads
    what the thread 32 places away in its pair wrote (strict: the read is ordered)."""
    ptx = _BARRIERS.format(shift=5)  # warp w -> barrier 4 + (w & 1): pairs (0, 2), (1, 3)
    ptx = ptx.replace("xor.b32 %r5, %r3, 128;", "xor.b32 %r5, %r3, 256;")
    out = run_ptx(ptx, [np.zeros(128, np.uint32)], (1, 1, 1), strict_async=True)
    np.testing.assert_array_equal(out[0], np.arange(128) ^ 64)


def test_lanes_of_one_warp_naming_two_barriers_are_an_error():
    ptx = _BARRIERS.format(shift=4)  # lanes 0-15 and 16-31 of a warp: different barriers
    with pytest.raises(PtxSimError, match="lanes of one warp at a bar.sync name different"):
        run_ptx(ptx, [np.zeros(128, np.uint32)], (1, 1, 1))
