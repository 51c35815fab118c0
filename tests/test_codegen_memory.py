"""runtime/codegen memory: tiled and element-wise loads/stores of every element type, pointer
gathers/scatters with masks and padding, atomics (tile, replicated and scalar), memory
semantics and hints. Each kernel compiles for sm_80/90/100/120 (ptxas, no spills) and runs in
the SIMT simulator against the reference interpreter (and numpy)."""

from __future__ import annotations

import json
import re
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest

from tilegen.runtime.codegen.driver import find_ptxas
from tilegen.runtime.codegen.emit import MIN_ISA, PTX_VERSION
from tilegen.runtime.ptxsim import PtxSimRunError, compile_to_ptx, run_ptxsim
from tilegen.runtime.interp.api import load_module, run_module

PTXAS = find_ptxas()
SMS = ("sm_80", "sm_90", "sm_100", "sm_120")


def _module(tmp_path, text: str, name: str = "k.mlir"):
    f = tmp_path / name
    f.write_text("cuda_tile.module @m {\n" + text + "\n}\n")
    return f


def _ptxas_clean(tmp_path, ptx: str, sm: str) -> str:
    src = tmp_path / f"k.{sm}.ptx"
    src.write_text(ptx)
    p = subprocess.run(
        [PTXAS, "-v", f"-arch={sm}", str(src), "-o", str(tmp_path / "k.cubin")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in p.stderr, p.stderr
    return p.stderr


def _check(tmp_path, f, args, grid=(1, 1, 1), sms=SMS) -> tuple[dict, dict[str, str]]:
    """ptxsim result (checked against the interpreter) and the PTX per target."""
    want = run_module(load_module(f), args, grid)
    got = run_ptxsim(load_module(f), args, grid, "sm_90")
    for name, _ in args:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    ptx = {}
    for sm in sms:
        ptx[sm] = compile_to_ptx(load_module(f), sm)
        if PTXAS is not None:
            _ptxas_clean(tmp_path, ptx[sm], sm)
    return got, ptx


# ----------------------------------------------------------------------------- tiled copies


def _copy_kernel(et: str, tile: int, aligned: bool) -> str:
    view = f"tensor_view<?x{et}, strides=[1]>"
    part = f"partition_view<tile=({tile}), {view}>"
    if aligned:
        pre = "\n    ".join(
            f"%{x}0 = assume div_by<16>, %{x} : tile<{t}>"
            for x, t in (("a", f"ptr<{et}>"), ("b", f"ptr<{et}>"), ("as", "i32"), ("bs", "i32"))
        )
    else:
        pre = "\n    ".join(f"%{x}0 = assume bounded<0, ?>, %{x} : tile<i32>" for x in ("as", "bs"))
        pre += f"\n    %a0 = assume div_by<{1}>, %a : tile<ptr<{et}>>"
        pre += f"\n    %b0 = assume div_by<{1}>, %b : tile<ptr<{et}>>"
    return f"""
  entry @copy(%a: tile<ptr<{et}>>, %as: tile<i32>, %ast: tile<i32>, %b: tile<ptr<{et}>>,
              %bs: tile<i32>, %bst: tile<i32>) {{
    %t0 = make_token : token
    {pre}
    %va = make_tensor_view %a0, shape = [%as0], strides = [1] : tile<i32> -> {view}
    %vb = make_tensor_view %b0, shape = [%bs0], strides = [1] : tile<i32> -> {view}
    %bx, %by, %bz = get_tile_block_id : tile<i32>
    %qa = make_partition_view %va : {part}
    %x, %t1 = load_view_tko weak %qa[%bx] token = %t0 : {part}, tile<i32> -> tile<{tile}x{et}>, token
    %qb = make_partition_view %vb : {part}
    %t2 = store_view_tko weak %x, %qb[%bx] token = %t0 : tile<{tile}x{et}>, {part}, tile<i32> -> token
    return
  }}"""


_NP = {
    "i1": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
}


def _data(et: str, n: int, rng) -> np.ndarray:
    if et == "bf16":  # bf16 travels as its bits; compare bits
        return rng.integers(0, 1 << 16, n).astype(np.uint16)
    if et.startswith("f8"):
        return rng.integers(0, 1 << 8, n).astype(np.uint8)
    if et == "i1":
        return rng.integers(0, 2, n).astype(np.bool_)
    if et.startswith("i"):
        info = np.iinfo(_NP[et])
        return rng.integers(info.min, info.max, n, dtype=_NP[et])
    return rng.standard_normal(n).astype(_NP[et])


#: (element, tile, aligned, ld, st): the accesses the proven vector width allows
COPIES = [
    ("f16", 1024, True, "v4.b32", "v4.b32"),  # 8 x f16 packed into 4 b32 words
    ("bf16", 1024, True, "v4.b32", "v4.b32"),
    ("i16", 1024, True, "v4.b32", "v4.b32"),
    ("f32", 512, True, "v4.f32", "v4.f32"),
    ("f64", 256, True, "v2.f64", "v2.f64"),
    ("i8", 2048, True, "v4.s8", "v4.b8"),
    ("i64", 256, True, "v2.b64", "v2.b64"),
    ("i1", 2048, True, "v4.u8", "v4.u8"),
    ("f8E4M3FN", 2048, True, "v4.u8", "v4.b8"),
    ("f8E5M2", 128, False, "u8", "b8"),
    ("i16", 256, True, "b16", "b16"),  # replicated layout: scalar accesses, canonical stores
    ("f32", 256, False, "f32", "f32"),  # nothing proven: one predicate per element
    ("f16", 256, False, "b16", "b16"),
    ("i8", 128, False, "s8", "b8"),
]


@pytest.mark.parametrize("et,tile,aligned,ld,st", COPIES)
def test_tiled_copy(tmp_path, et, tile, aligned, ld, st):
    rng = np.random.default_rng(7)
    n = 2 * tile - 16 if aligned else 2 * tile - 3  # a partial last tile: bounds masks
    a = _data(et, n, rng)
    f = _module(tmp_path, _copy_kernel(et, tile, aligned))
    if et == "bf16" or et.startswith("f8"):  # bit stand-ins: check the bits against numpy
        sms = ("sm_89", "sm_90") if et.startswith("f8") else ("sm_80", "sm_90")  # fp8: sm_89+
        ptx = {sm: compile_to_ptx(load_module(f), sm) for sm in sms}
        for sm in ptx if PTXAS is not None else ():
            _ptxas_clean(tmp_path, ptx[sm], sm)
        got = _run_bits(ptx["sm_90"], a)
    else:
        res, ptx = _check(tmp_path, f, [("a", a), ("b", np.zeros_like(a))], (2, 1, 1), SMS[:2])
        got = res["b"]
    np.testing.assert_array_equal(got, a)
    assert re.search(rf"ld\.global\.{re.escape(ld)}\s", ptx["sm_90"]), ptx["sm_90"]
    assert re.search(rf"st\.global\.{re.escape(st)}\s", ptx["sm_90"]), ptx["sm_90"]
    assert not re.search(r"\.v[248]\.", ptx["sm_90"]) or aligned


def _run_bits(ptx: str, a):
    """Run a copy on raw uint16 bits (the launcher passes bytes)."""
    from tilegen.runtime.ptx.launch import run_ptx

    return run_ptx(ptx, [a, np.zeros_like(a)], (2, 1, 1))[1]


# ----------------------------------------------------------------------------- pointers


def _sig(*params: str) -> str:
    """Entry parameters of 1-D arrays 'name:et' (cuTile flattening: pointer, size, stride)."""
    out = []
    for p in params:
        name, et = p.split(":")
        out.append(f"%{name}: tile<ptr<{et}>>, %{name}_n: tile<i32>, %{name}_s: tile<i32>")
    return ", ".join(out)


def _ptrs(name: str, et: str, n: int, off: str) -> str:
    """Lines making %{name}_p: tile<n x ptr<et>> = %name + %off."""
    return f"""
    %{name}_1 = reshape %{name} : tile<ptr<{et}>> -> tile<1xptr<{et}>>
    %{name}_b = broadcast %{name}_1 : tile<1xptr<{et}>> -> tile<{n}xptr<{et}>>
    %{name}_p = offset %{name}_b, {off} : tile<{n}xptr<{et}>>, tile<{n}xi32> -> tile<{n}xptr<{et}>>"""


GATHER = f"""
  entry @g({_sig("src:f32", "idx:i32", "msk:i1", "dst:f32", "sc:f32")}) {{
    %i = iota : tile<128xi32>
    {_ptrs("idx", "i32", 128, "%i")}
    %ix, %t0 = load_ptr_tko weak %idx_p : tile<128xptr<i32>> -> tile<128xi32>, token
    {_ptrs("msk", "i1", 128, "%i")}
    %m, %t1 = load_ptr_tko weak %msk_p : tile<128xptr<i1>> -> tile<128xi1>, token
    {_ptrs("src", "f32", 128, "%ix")}
    %pad = constant <f32: -1.5> : tile<128xf32>
    %v, %t2 = load_ptr_tko weak %src_p, %m, %pad : tile<128xptr<f32>>, tile<128xi1>, tile<128xf32> -> tile<128xf32>, token
    {_ptrs("dst", "f32", 128, "%i")}
    %t3 = store_ptr_tko weak %dst_p, %v : tile<128xptr<f32>>, tile<128xf32> -> token
    {_ptrs("sc", "f32", 128, "%ix")}
    %t4 = store_ptr_tko weak %sc_p, %v, %m : tile<128xptr<f32>>, tile<128xf32>, tile<128xi1> -> token
    return
  }}"""


def test_pointer_gather_scatter_mask_padding(tmp_path):
    rng = np.random.default_rng(1)
    src = rng.standard_normal(300).astype(np.float32)
    idx = rng.permutation(300)[:128].astype(np.int32)
    msk = rng.integers(0, 2, 128).astype(np.bool_)
    args = [("src", src), ("idx", idx), ("msk", msk), ("dst", np.zeros(128, np.float32))]
    args.append(("sc", np.zeros(300, np.float32)))
    got, ptx = _check(tmp_path, _module(tmp_path, GATHER), args)
    want = np.where(msk, src[idx], np.float32(-1.5))
    np.testing.assert_array_equal(got["dst"], want)
    sc = np.zeros(300, np.float32)
    sc[idx[msk]] = want[msk]
    np.testing.assert_array_equal(got["sc"], sc)
    text = ptx["sm_90"]
    assert "ld.global.u8" in text and re.search(r"@%p\d+ ld\.global\.f32", text)
    assert re.search(r"@%p\d+ st\.global\.f32", text)


# ----------------------------------------------------------------------------- atomics

ATOMICS = f"""
  entry @a({_sig("cnt:i32", "perm:i32", "out:i32", "f:f32", "d:f64", "h:f16", "s:i32", "so:i32", "wide:i32")}) {{
    %i = iota : tile<16xi32>
    {_ptrs("perm", "i32", 16, "%i")}
    %pm, %t0 = load_ptr_tko weak %perm_p : tile<16xptr<i32>> -> tile<16xi32>, token
    {_ptrs("cnt", "i32", 16, "%pm")}
    %o, %t1 = atomic_rmw_tko acq_rel device %cnt_p, add, %i : tile<16xptr<i32>>, tile<16xi32> -> tile<16xi32>, token
    {_ptrs("out", "i32", 16, "%i")}
    %t2 = store_ptr_tko weak %out_p, %o : tile<16xptr<i32>>, tile<16xi32> -> token
    %z = constant <i32: 0> : tile<16xi32>
    {_ptrs("f", "f32", 16, "%z")}
    %one = constant <f32: 1.0> : tile<16xf32>
    %fo, %t3 = atomic_rmw_tko relaxed device %f_p, addf, %one : tile<16xptr<f32>>, tile<16xf32> -> tile<16xf32>, token
    {_ptrs("d", "f64", 16, "%z")}
    %oned = constant <f64: 0.25> : tile<16xf64>
    %do, %t4 = atomic_rmw_tko relaxed device %d_p, addf, %oned : tile<16xptr<f64>>, tile<16xf64> -> tile<16xf64>, token
    {_ptrs("h", "f16", 16, "%z")}
    %oneh = constant <f16: 2.0> : tile<16xf16>
    %ho, %t5 = atomic_rmw_tko relaxed tl_blk %h_p, addf, %oneh : tile<16xptr<f16>>, tile<16xf16> -> tile<16xf16>, token
    %c7 = constant <i32: 7> : tile<i32>
    %c9 = constant <i32: 9> : tile<i32>
    %so0, %t6 = atomic_cas_tko acq_rel device %s, %c7, %c9 : tile<ptr<i32>>, tile<i32> -> tile<i32>, token
    %so1, %t7 = atomic_rmw_tko release sys %s, max, %c7 : tile<ptr<i32>>, tile<i32> -> tile<i32>, token
    %t8 = store_ptr_tko weak %so, %so0 : tile<ptr<i32>>, tile<i32> -> token
    %o2 = reshape %o : tile<16xi32> -> tile<16x1xi32>
    %o3 = broadcast %o2 : tile<16x1xi32> -> tile<16x8xi32>
    %r1 = reshape %i : tile<16xi32> -> tile<16x1xi32>
    %r2 = broadcast %r1 : tile<16x1xi32> -> tile<16x8xi32>
    %j = iota : tile<8xi32>
    %j1 = reshape %j : tile<8xi32> -> tile<1x8xi32>
    %j2 = broadcast %j1 : tile<1x8xi32> -> tile<16x8xi32>
    %c8 = constant <i32: 8> : tile<16x8xi32>
    %r8 = muli %r2, %c8 : tile<16x8xi32>
    %ij = addi %r8, %j2 : tile<16x8xi32>
    %w1 = reshape %wide : tile<ptr<i32>> -> tile<1x1xptr<i32>>
    %wb = broadcast %w1 : tile<1x1xptr<i32>> -> tile<16x8xptr<i32>>
    %wp = offset %wb, %ij : tile<16x8xptr<i32>>, tile<16x8xi32> -> tile<16x8xptr<i32>>
    %t9 = store_ptr_tko weak %wp, %o3 : tile<16x8xptr<i32>>, tile<16x8xi32> -> token
    return
  }}"""


def test_atomics_tile_replicated_and_scalar(tmp_path):
    perm = np.random.default_rng(3).permutation(16).astype(np.int32)
    cnt = np.arange(100, 116, dtype=np.int32)
    args = [("cnt", cnt), ("perm", perm), ("out", np.zeros(16, np.int32))]
    args += [("f", np.zeros(2, np.float32)), ("d", np.zeros(2, np.float64))]
    args += [("h", np.zeros(2, np.float16)), ("s", np.array([7, 0], np.int32))]
    args += [("so", np.zeros(2, np.int32)), ("wide", np.zeros(128, np.int32))]
    got, ptx = _check(tmp_path, _module(tmp_path, ATOMICS), args)
    want = cnt.copy()
    want[perm] += np.arange(16, dtype=np.int32)
    np.testing.assert_array_equal(got["cnt"], want)  # each element added exactly once
    np.testing.assert_array_equal(got["out"], cnt[perm])
    # every copy of the replicated result holds the old value (8 copies land in other threads)
    np.testing.assert_array_equal(got["wide"], np.repeat(cnt[perm], 8))
    assert got["f"][0] == 16 and got["d"][0] == 4 and got["h"][0] == 32
    assert got["s"][0] == 9 and got["so"][0] == 7  # the cas result, broadcast from thread 0
    text = ptx["sm_90"]
    for ins in (
        "atom.acq_rel.gpu.global.add.u32",
        "atom.relaxed.gpu.global.add.f32",
        "atom.relaxed.gpu.global.add.f64",
        "atom.relaxed.cta.global.add.noftz.f16",
        "atom.acq_rel.gpu.global.cas.b32",
        "atom.release.sys.global.max.s32",
    ):
        assert ins in text, ins
    # 16 elements over 128 threads: one atomic per element and register, canonical copies only
    assert len(re.findall(r"atom\.acq_rel\.gpu\.global\.add\.u32", text)) == 1


# ----------------------------------------------------------------------------- semantics, hints


def _op(**attrs):
    return SimpleNamespace(attributes={k: SimpleNamespace(value=v) for k, v in attrs.items()})


#: (attributes, sm) -> (ld opcode, st opcode); enum values as in spec/types/nv_tileaa_enums.yaml
HINTS = [
    ({}, 80, "ld.global", "st.global"),
    ({"mem_semantic": 1, "mem_scope": 2}, 80, "ld.relaxed.gpu.global", "st.relaxed.gpu.global"),
    ({"mem_semantic": 2, "mem_scope": 0}, 90, "ld.acquire.cta.global", None),
    ({"mem_semantic": 3, "mem_scope": 3}, 90, None, "st.release.sys.global"),
    ({"mem_semantic": 2, "mem_scope": 1}, 90, "ld.acquire.cluster.global", None),
    ({"mem_semantic": 2, "mem_scope": 1}, 80, "ld.acquire.gpu.global", None),  # no clusters
    ({"volatile": 0}, 80, "ld.volatile.global", "st.global"),
    ({"cache_modifier": 2}, 80, "ld.global.cg", "st.global.cg"),
    ({"cache_modifier": 5}, 80, "ld.global.cv", "st.global"),  # .cv is load-only
    ({"cache_modifier": 4, "eviction_policy": 1}, 80, "ld.global.lu", "st.global.L1::evict_first"),
    ({"eviction_policy": 2}, 80, "ld.global.L1::evict_last", "st.global.L1::evict_last"),
    (
        {"eviction_policy": 1, "mem_semantic": 1, "mem_scope": 2, "cache_modifier": 2},
        80,
        "ld.relaxed.gpu.global.L1::evict_first",  # ordered accesses take no cache operator
        "st.relaxed.gpu.global.L1::evict_first",
    ),
]


def test_memory_semantics_and_hints_spelling_assemble_and_simulate(tmp_path):
    from tilegen.runtime.codegen.memory import ld_opcode, st_opcode
    from tilegen.runtime.ptx.launch import run_ptx

    rows = []  # (target sm, instructions)
    for attrs, sm, ld, st in HINTS:
        em, op = SimpleNamespace(sm=sm), _op(**attrs)
        lines = []
        if ld is not None:
            assert ld_opcode(em, op, "global") == ld, attrs
            lines.append(f"{ld}.v2.f32 {{%f1, %f2}}, [%rd1];")
            lines.append("add.f32 %f3, %f3, %f1;")
            lines.append("add.f32 %f3, %f3, %f2;")
        if st is not None:
            assert st_opcode(em, op, "global") == st, attrs
            lines.append(f"{st}.f32 [%rd1+8], %f3;")
        rows.append((sm, lines))
    assert ld_opcode(SimpleNamespace(sm=90), _op(cache_modifier=2), None) == "ld"  # generic

    def kernel(target: int) -> str:
        body = "\n\t".join(x for sm, lines in rows if sm <= target for x in lines)
        return f""".version {MIN_ISA.get(target, PTX_VERSION)}
.target sm_{target}
.address_size 64
.visible .entry hints(.param .u64 p) .reqntid 32, 1, 1 {{
\t.reg .b64 %rd<2>;
\t.reg .f32 %f<4>;
\tld.param.u64 %rd1, [p];
\tmov.f32 %f3, 0f00000000;
\t{body}
\tret;
}}
"""

    a = np.array([1.0, 2.0, 0.0, 0.0], np.float32)
    out = run_ptx(kernel(90), [a], (1, 1, 1))[0]
    n_ld = sum(1 for h in HINTS if h[2] is not None)
    # every load reads a[0:2] (3 each) into a running sum that the stores write to a[2]
    assert out[0] == 1 and out[1] == 2 and out[2] == 3 * n_ld
    if PTXAS is not None:
        for sm in SMS:
            _ptxas_clean(tmp_path, kernel(int(sm[3:])), sm)


def test_bf16_atomic_add_needs_sm90(tmp_path):
    f = _module(
        tmp_path,
        f"""
  entry @b({_sig("h:bf16")}) {{
    %z = constant <i32: 0> : tile<8xi32>
    {_ptrs("h", "bf16", 8, "%z")}
    %one = constant <bf16: 1.0> : tile<8xbf16>
    %o, %t = atomic_rmw_tko relaxed device %h_p, addf, %one : tile<8xptr<bf16>>, tile<8xbf16> -> tile<8xbf16>, token
    return
  }}""",
    )
    assert "atom.relaxed.gpu.global.add.noftz.bf16" in compile_to_ptx(load_module(f), "sm_90")
    with pytest.raises(PtxSimRunError) as e:
        compile_to_ptx(load_module(f), "sm_80")
    msg = e.value.diagnostics[0].format()
    assert "k.mlir:" in msg and "'addf' atomics on bf16" in msg


# ----------------------------------------------------------------------------- corpus kernels

from paths import CORPUS  # ../shared or $TILEGEN_SHARED

OUT = CORPUS / "out"
#: kernel file stem -> npz stem (memory-heavy kernels: pointers, gathers, atomics, globals)
KERNELS = {
    "advanced_indexing": "advanced_indexing",
    "atomics": "atomics",
    "gather_scatter": "gather_scatter",
    "raw_pointer": "raw_pointer",
    "newer_ops": "newer_ops",
    "print_kernel.v13_1": "print_kernel",  # get_global + a CAS spin lock
}


@pytest.mark.skipif(not OUT.exists(), reason="cuTile corpus not present")
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_corpus_kernel(tmp_path, capsys, kernel):
    from tilegen.runtime.interp.api import compare_expected, load_npz_args, load_npz_expected

    stem = KERNELS[kernel]
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    entries = manifest["kernels"] if isinstance(manifest, dict) else manifest
    rtol, atol = next(k for k in entries if k["name"] == stem).get("tolerance_rtol_atol", [0, 0])
    src = OUT / f"{kernel}.tileirbc"
    args, grid = load_npz_args(OUT / f"{stem}.npz")
    got = run_ptxsim(load_module(src), args, grid or (1, 1, 1), "sm_90")
    assert compare_expected(got, load_npz_expected(OUT / f"{stem}.npz"), rtol, atol) == []
    if PTXAS is not None:
        for sm in SMS:
            _ptxas_clean(tmp_path, compile_to_ptx(load_module(src), sm), sm)
