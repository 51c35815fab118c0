"""The async consumers convert an A the IR converts f32 -> tf32 outside the stage
(runtime/codegen/async_rs.py, docs/pipelines.md section 55): on sm_90a it is read by
``ldmatrix``, converted in registers and handed to ``wgmma`` as its fragment, a wgmma group per
column box of A so that each group's fragments stay put while its wgmmas run; on sm_100a each
consumer thread stores its converted row into one of two tensor memory buffers, which the
``tcgen05.mma``s read as A. Text kernels of tests/test_codegen_pipeline.py, from C, in the
strict simulator; each planted bug is caught."""

import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tilegen.runtime.ptx.sim.cta import PtxSimError  # noqa: E402
from tilegen.runtime.ptxas import find_ptxas  # noqa: E402

pytestmark = pytest.mark.skipif(
    not Path(find_ptxas() or "/nonexistent").exists(), reason="ptxas is not installed"
)

LDSM = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"


def _ptx(m, n, k, bt, target="sm_90a"):
    import test_codegen_pipeline as tp
    import test_tmem_chunks as tc

    ptx = tp._compile(None, "tf32", "f32", m, n, k, target, bt=bt, tma=True)
    return tc.assembled(ptx, int(target[3:-1]))


def _tf32(x: np.ndarray) -> np.ndarray:
    """f32 -> tf32, ties to even (the IR's ftof)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0xFFF + ((u >> 13) & 1)) & ~np.uint64(0x1FFF)
    return u.astype(np.uint32).view(np.float32)


def _operands(m, n, ktot, bt, seed=3):
    """Values with ties in their low 13 bits (rounding them away from zero is wrong)."""
    rs = np.random.RandomState(seed)
    a = rs.randint(-64, 64, (m, ktot)) * 2.0**-6 + rs.randint(0, 2, (m, ktot)) * 2.0**-17
    b = rs.standard_normal((n, ktot) if bt else (ktot, n))
    c = rs.standard_normal((m, n))
    return a.astype(np.float32), b.astype(np.float32), c.astype(np.float32)


def _check(ptx, m, n, k, bt, nk=3):
    import test_codegen_pipeline as tp

    a, b, c = _operands(m, n, k * nk, bt)
    out = tp._launch(ptx, a, b, c, nk, k * nk, strict_async=True)
    want = tp._ref(_tf32(a).astype(np.float64), _tf32(b).astype(np.float64), c, k * nk, bt)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m,n,bt", [(128, 128, False), (128, 128, True), (64, 64, True)])
def test_tf32_a_is_converted_in_registers(m, n, bt):
    k = 32
    ptx = _ptx(m, n, k, bt)
    nq = m // 64
    # two copies of the loop, nq m64 instances x 4 k8 steps each, an ldmatrix.x4 apiece
    assert ptx.count(LDSM) == 2 * nq * 4
    frags = re.findall(r"wgmma\.mma_async\S* \{[^}]*\}, \{(%r\d+(?:, %r\d+)*)\}", ptx)
    assert len(frags) == ptx.count("wgmma.mma_async") == 2 * nq * 4
    assert all(len(f.split(", ")) == 4 for f in frags)
    assert len(set(frags)) == len(frags)  # each copy's fragments are registers of its own
    # the stage's only 16-byte reads are B's (transposed or rounded in place): none of A's
    assert ptx.count("ld.shared.v4.b32") == 2 * (n * k * 4 // 16 // 128)
    _check(ptx, m, n, k, bt)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_ties_round_to_even(target):
    # A all 1 + 2^-11, exactly halfway between two tf32 values: the IR's ftof (ties to even)
    # gives 1, cvt.rna would give 1 + 2^-10, 1e-3 off in every output
    import test_codegen_pipeline as tp

    m = n = 64
    k, nk = 32, 2
    ptx = _ptx(m, n, k, True, target)
    a = np.full((m, k * nk), 1 + 2.0**-11, np.float32)
    b = np.ones((n, k * nk), np.float32)
    c = np.zeros((m, n), np.float32)
    out = tp._launch(ptx, a, b, c, nk, k * nk, strict_async=True)
    np.testing.assert_array_equal(out, np.full((m, n), k * nk, np.float32))


def test_each_column_box_of_a_is_a_wgmma_group_of_its_own():
    # 128 x 64 f32 of A a stage is two 128-byte column boxes: each is loaded, multiplied and
    # committed on its own (wait_group 1 after each), so one copy of the loop and two boxes'
    # registers (2 x 32 beside 128 accumulators) suffice
    m = n = 128
    k = 64
    ptx = _ptx(m, n, k, False)
    assert ptx.count(LDSM) == 2 * 8  # m64 instances x k8 steps, one copy of the loop
    assert ptx.count("wgmma.mma_async") == 2 * 8
    loop = ptx[ptx.index("async_consume") : ptx.index("wgmma.wait_group.sync.aligned 0")]
    assert loop.count("wgmma.commit_group") == loop.count("wgmma.wait_group.sync.aligned 1") == 2
    # the second box's fragments are loaded after the first box's group is committed
    first = loop.index("wgmma.commit_group")
    assert loop.count(LDSM, 0, first) == loop.count(LDSM, first) == 8
    _check(ptx, m, n, k, False, nk=3)


def test_two_warp_groups_take_the_producers_registers_for_a():
    # 256 x 128 on two warp groups: two boxes' fragments (64 registers) beside 128
    # accumulators do not fit the launch's 168 a thread; the rule has the consumers take the
    # registers the producer warp group gives back (setmaxnreg.inc 232), as for no other
    # 256 x 128 (an f16 one keeps 168)
    import test_codegen_pipeline as tp

    m, n, k = 256, 128, 32
    ptx = _ptx(m, n, k, False)
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in ptx
    assert ptx.count(LDSM) == 2 * 2 * 4  # two copies, 2 m64 instances a warp group, 4 steps
    assert ptx.count("wgmma.mma_async") == 2 * 8
    assert "ld.shared.v4.b32" in ptx  # (B^T's copy)
    _check(ptx, m, n, k, False, nk=3)
    f16 = tp._compile(None, "f16", "f32", m, n, k, "sm_90a", tma=True)
    assert "setmaxnreg.dec" in f16 and "setmaxnreg.inc" not in f16


@pytest.fixture(scope="module")
def plain():
    return _ptx(64, 64, 32, True)


def test_fragments_overwritten_in_flight_are_caught(plain):
    # the second copy loads into the first copy's registers, whose wgmmas are still in flight
    # (wait_group 1 retires them only after the second copy's wgmmas are issued)
    lines = plain.splitlines(keepends=True)
    ld = [i for i, line in enumerate(lines) if LDSM in line]
    regs = [re.search(r"\{([^}]*)\}", lines[i]).group(1).split(", ") for i in ld]
    half = len(ld) // 2
    rename = {}
    for first, second in zip(regs[:half], regs[half:]):
        rename.update(zip(second, first))
    pat = re.compile("|".join(re.escape(r) + r"\b" for r in rename))
    for i in range(ld[half], len(lines)):
        lines[i] = pat.sub(lambda mt: rename[mt.group(0)], lines[i])
    bad = "".join(lines)
    assert bad != plain
    with pytest.raises(PtxSimError, match="is written while the wgmma.mma_async"):
        _check(bad, 64, 64, 32, True)


def test_the_ring_reused_before_every_warp_has_read_it_is_caught():
    # the barrier after the loop: the epilogue stages the tile in the ring, over the last
    # stages, which other warps' ldmatrix may still be reading
    ptx = _ptx(128, 128, 32, False)
    end = ptx.index("wgmma.wait_group.sync.aligned 0")
    at = ptx.index("\tbar.sync", end)
    bad = ptx[:at] + ptx[ptx.index("\n", at) + 1 :]
    with pytest.raises(PtxSimError, match="overwrites shared byte"):
        _check(bad, 128, 128, 32, False)


TST = "tcgen05.st.sync.aligned.32x32b.x32.b32"


@pytest.mark.parametrize("bt", [False, True])
def test_sm100_a_is_converted_into_tensor_memory(bt):
    m = n = 128
    k = 32
    ptx = _ptx(m, n, k, bt, "sm_100a")
    # the accumulator's 128 columns and A's two buffers of 32
    assert "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32" in ptx
    assert re.search(r"tcgen05\.alloc\S* \[[^]]*\], 256;", ptx)
    # two copies of the loop, one buffer each: every consumer thread reads its row of A
    # (8 chunks of 16 bytes) and stores it into its TMEM lane
    loop = ptx[ptx.index("async_issue") :]
    assert loop.count(TST) == 2
    mmas = re.findall(r"tcgen05\.mma\S* \[%r\d+\], (\S+), %rd\d+,", ptx)
    assert len(mmas) == 2 * k // 8 and all(x.startswith("[%r") for x in mmas)
    # A's 16-byte reads, beside B's rounding in place (its chunks over 128 threads)
    assert ptx.count("ld.shared.v4.b32") == 2 * (8 + n * k * 4 // 16 // 128)
    # each copy commits its MMAs to the stage's empty barrier and its buffer's barrier
    assert loop.count("tcgen05.commit") == 2 * 2 + 1  # (+ the done barrier)
    _check(ptx, m, n, k, bt)


def test_sm100_two_column_boxes_of_a():
    m = n = 128
    k = 64
    ptx = _ptx(m, n, k, False, "sm_100a")
    assert ptx[ptx.index("async_issue") :].count(TST) == 2 * 2
    _check(ptx, m, n, k, False, nk=3)


@pytest.fixture(scope="module")
def sm100():
    return _ptx(128, 128, 32, True, "sm_100a")


def test_buffer_stored_before_its_mmas_complete_is_caught(sm100):
    # without the wait for buffer j's barrier, stage i + 2 stores its rows of A over the
    # buffer the MMAs of stage i may still be reading
    lines = sm100.splitlines(keepends=True)
    waits = [
        i
        for i, line in enumerate(lines)
        if "mbarrier.try_wait" in line
        and i > 0
        and "tcgen05.st" in "".join(lines[i : i + 60])
        and "ld.shared.v4" in "".join(lines[i - 40 : i])
    ]
    assert len(waits) == 2
    for i in waits:
        pred = re.search(r"try_wait\S* (%p\d+),", lines[i]).group(1)
        lines[i] = f"\tsetp.eq.u32 {pred}, 0, 0;\n"
    with pytest.raises(PtxSimError, match="still reads as its A operand"):
        _check("".join(lines), 128, 128, 32, True, nk=4)


def test_rows_stored_after_the_barrier_are_caught(sm100):
    # the consumers' barrier before their stores: thread 0 issues the MMAs while other warps'
    # rows of A are not yet (or not known to be) in tensor memory
    lines = sm100.splitlines(keepends=True)
    top = next(i for i, line in enumerate(lines) if line.startswith("$L__async_issue"))
    end = next(i for i, line in enumerate(lines) if line.startswith("$L__async_issue_end"))
    fences = [i for i, line in enumerate(lines) if "tcgen05.fence::before_thread_sync" in line]
    bars = [i + 1 for i in fences if top < i < end and lines[i + 1].startswith("\tbar.sync 1")]
    assert len(bars) == 2
    for i in bars:
        # the barrier goes before this stage's first read of A
        j = max(x for x in range(i) if "fence.proxy.async" in lines[x])
        lines.insert(j + 1, lines.pop(i))
    with pytest.raises(PtxSimError, match="as its A operand, tensor memory .* nothing orders"):
        _check("".join(lines), 128, 128, 32, True)


@pytest.mark.parametrize("k, bt", [(32, False), (32, True), (64, True)])
def test_sm100_wide_tiles_store_half_a_row_a_warp_group(k, bt):
    # 128 x 256 on 8 warps (the wide form): warps w and w + 4 share TMEM lanes 32 (w % 4) ..;
    # warp group h stores half of each row of A: chunks 4 h .. of a single box (x16 at column
    # 16 h), else boxes h K / 64 .. whole
    m, n = 128, 256
    ptx = _ptx(m, n, k, bt, "sm_100a")
    assert ".reqntid 384" in ptx  # (8 consumer warps and the producer warp group)
    loop = ptx[ptx.index("async_issue") :]
    shape = "x16" if k == 32 else "x32"
    stores = re.findall(r"tcgen05\.st\.sync\.aligned\.32x32b\.(x\d+)", loop)
    assert stores == [shape] * (2 * max(1, k // 64)), stores
    mmas = re.findall(r"tcgen05\.mma\S* \[%r\d+\], (\S+), %rd\d+,", ptx)
    assert len(mmas) == 2 * k // 8 and all(x.startswith("[%r") for x in mmas)
    _check(ptx, m, n, k, bt, nk=3)


def test_sm100_wide_tiles_halves_planted_on_one_half_are_caught():
    # both warp groups storing the first half of a single box's row (the XOR that moves
    # warp group 1 to chunks 4 .. left out): columns 16 .. 31 of A hold a copy of 0 .. 15
    ptx = _ptx(128, 256, 32, False, "sm_100a")
    lines = ptx.splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if re.match(r"\tshl\.b32 %r\d+, %r\d+, 6;", line)]
    assert len(at) == 1
    reg = re.match(r"\tshl\.b32 (%r\d+),", lines[at[0]]).group(1)
    lines[at[0]] = f"\tmov.b32 {reg}, 0;\n"
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        _check("".join(lines), 128, 256, 32, False)


@pytest.mark.parametrize("n, k, bt", [(128, 32, False), (128, 64, True), (64, 32, True)])
def test_sm100_tall_tiles_keep_both_halves_of_a_in_each_buffer(n, k, bt):
    # 256 rows on 8 warps (two accumulators, M 128 each): thread t stores row t into lane
    # t % 128 at column K (t / 128) of the buffer; the second accumulator's MMAs read A K
    # columns on. The accumulators' 2 N columns, then two buffers of 2 K
    m = 256
    ptx = _ptx(m, n, k, bt, "sm_100a")
    cols = 2 * n + 4 * k
    alloc = int(re.search(r"tcgen05\.alloc\S* \[[^]]*\], (\d+);", ptx).group(1))
    assert alloc == max(32, 1 << (cols - 1).bit_length())
    loop = ptx[ptx.index("async_issue") :]
    assert loop.count(TST) == 2 * (k // 32)
    mmas = re.findall(r"tcgen05\.mma\S* \[%r\d+\], (\S+), %rd\d+,", ptx)
    assert len(mmas) == 2 * 2 * k // 8 and all(x.startswith("[%r") for x in mmas)
    _check(ptx, m, n, k, bt, nk=3)


def test_sm100_tall_tiles_halves_in_one_column_are_caught():
    # rows 128 .. stored over rows 0 .. (the K h column offset left out): the first
    # accumulator's MMAs read the second half's rows
    ptx = _ptx(256, 128, 32, False, "sm_100a")
    lines = ptx.splitlines(keepends=True)
    at = [
        i
        for i, line in enumerate(lines)
        if re.match(r"\tmad\.lo\.s32 %r\d+, %r\d+, 32, %r\d+;", line)
    ]
    mads = [i for i in at if "shl.b32" in lines[i - 1] and ", 21;" in lines[i - 1]]
    assert len(mads) == 1
    dst, src = re.match(r"\tmad\.lo\.s32 (%r\d+), %r\d+, 32, (%r\d+);", lines[mads[0]]).groups()
    lines[mads[0]] = f"\tmov.b32 {dst}, {src};\n"
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        _check("".join(lines), 256, 128, 32, False)
