"""The 13.4/13.5 pointer attribute (``ptr_attr``) end to end: text syntax, make_tensor_view's
verifier rules, bytecode encoding and version rules, and NVIDIA ``tileirdisasm`` agreement.

Ground truth (tileirdisasm 13.5): 13.4 files written by tilegen's writer; 13.5 files (unicast /
multicast) made from a 13.4 file by patching its header, function record and enum bytes.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.bytecode import read_bytecode, write_bytecode
from tilegen.runtime.bytecode.errors import BytecodeError, BytecodeWriteError
from tilegen.runtime.diagnostics import DiagnosticEngine, DiagnosticError
from tilegen.runtime.types import F32, PointerType, TensorViewType, TileType
from tilegen.runtime.verify import verify_module

DISASM = (
    Path(sys.executable).parent.parent / "lib/python3.11/site-packages/nvidia/cu13/bin/tileirdisasm"
)
needs_disasm = pytest.mark.skipif(not DISASM.exists(), reason="tileirdisasm not installed")

# Bodies exactly as tileirdisasm 13.5 prints them (13.4 files).
STATIC = """\
entry @k(%arg0: tile<ptr<f32, <none>>>, %arg1: tile<i32>, %arg2: tile<ptr<f16>>) {
  %tview = make_tensor_view %arg0, shape = [16], strides = [1] : tile<ptr<f32, <none>>> -> tensor_view<16xf32, strides=[1], #cuda_tile.ptr_attr<none>>
  %tview_0 = make_tensor_view %arg0, shape = [%arg1, 16], strides = [%arg1, 1] : tile<ptr<f32, <none>>>, tile<i32> -> tensor_view<?x16xf32, strides=[?,1], #cuda_tile.ptr_attr<none>>
  %tview_1 = make_tensor_view %arg2, shape = [16], strides = [1] : tensor_view<16xf16, strides=[1]>
  %pview = make_partition_view %tview : partition_view<tile=(4), tensor_view<16xf32, strides=[1], #cuda_tile.ptr_attr<none>>>
  return
}"""
ZERO_D = """\
entry @k(%arg0: tile<ptr<f32, <none>>>) {
  %tview = make_tensor_view %arg0, shape = [], strides = [] : tile<ptr<f32, <none>>> -> tensor_view<f32, #cuda_tile.ptr_attr<none>>
  return
}"""
SIMPLE = """\
entry @k(%arg0: tile<ptr<f32, <none>>>) {
  %tview = make_tensor_view %arg0, shape = [16], strides = [1] : tile<ptr<f32, <none>>> -> tensor_view<16xf32, strides=[1], #cuda_tile.ptr_attr<none>>
  return
}"""
# a 13.5 file (patched from SIMPLE's bytes) as tileirdisasm prints it
MULTICAST = SIMPLE.replace("<none>", "<multicast>")


def module(body: str, name: str = "t.mlir"):
    return parse_module(f"cuda_tile.module @kernels {{\n{body}\n}}\n", name)


def body(m) -> str:
    tile_module = next(op for op in m.walk() if op.name == "cuda_tile.module")
    return print_module(tile_module, body_only=True, default_dialect="cuda_tile").strip()


def verify_errors(m) -> list[str]:
    diag = DiagnosticEngine()
    verify_module(m, diag)
    return [d.message for d in diag.diagnostics if d.severity == "error"]


def verify_diags(m) -> list[str]:
    diag = DiagnosticEngine()
    verify_module(m, diag)
    return [d.format() for d in diag.diagnostics]


# ---------------------------------------------------------------------------------- text


@pytest.mark.parametrize("text", [STATIC, ZERO_D, MULTICAST])
def test_text_round_trip(text):
    m = module(text)
    assert body(m) == text
    assert verify_errors(m) == []
    assert body(module(body(m))) == text


def test_types_carry_the_keyword():
    m = module(STATIC)
    entry = next(op for op in m.walk() if op.name == "cuda_tile.entry")
    views = [op.results[0].type for op in m.walk() if op.name == "cuda_tile.make_tensor_view"]
    assert entry.regions[0].blocks[0].args[0].type == TileType((), PointerType(F32, "none"))
    assert views[0] == TensorViewType(F32, (16,), (1,), ptr_attr="none")
    assert views[2].ptr_attr is None
    # the field is part of the type's identity
    assert PointerType(F32, "none") != PointerType(F32)
    assert TensorViewType(F32, (16,), (1,)) == TensorViewType(F32, (16,), (1,), None)


@pytest.mark.parametrize(
    "snippet, col",
    [
        ("entry @k(%a: tile<ptr<f32, <bogus>>>) {\n  return\n}", 29),
        (
            "entry @k(%a: tile<ptr<f32>>) {\n  %v = make_tensor_view %a, shape = [16], "
            "strides = [1] : tensor_view<16xf32, strides=[1], #cuda_tile.ptr_attr<uni>>\n"
            "  return\n}",
            None,
        ),
    ],
)
def test_bad_keyword_is_a_located_error(snippet, col):
    with pytest.raises(DiagnosticError) as e:
        module(snippet, "bad.mlir")
    d = e.value.diag
    assert "expected ::mlir::cuda_tile::PtrAttr to be one of: none, unicast, multicast" in d.message
    assert d.loc.file == "bad.mlir"
    if col is not None:
        assert (d.loc.line, d.loc.col) == (2, col)
    else:
        assert d.loc.line == 3 and d.loc.col > 80


def test_missing_angle_brackets_is_a_located_error():
    with pytest.raises(DiagnosticError) as e:
        module("entry @k(%a: tile<ptr<f32, none>>) {\n  return\n}", "bad.mlir")
    assert e.value.diag.message == "expected '<'"
    assert (e.value.diag.loc.file, e.value.diag.loc.line) == ("bad.mlir", 2)


def test_make_tensor_view_type_list_errors_are_located():
    text = (
        "entry @k(%a: tile<ptr<f32, <none>>>, %n: tile<i32>) {\n  %v = make_tensor_view %a, "
        "shape = [%n], strides = [1] : tile<ptr<f32, <none>>>, tile<i32>, tile<i32> -> "
        "tensor_view<?xf32, strides=[1], #cuda_tile.ptr_attr<none>>\n  return\n}"
    )
    with pytest.raises(DiagnosticError) as e:
        module(text, "bad.mlir")
    assert "expected at most one dynamic shape/stride type before '->'" in e.value.diag.message
    assert e.value.diag.loc.line == 3


# ---------------------------------------------------------------------------------- verifier

GENERIC = """\
entry @k(%arg0: tile<ptr<f32, <{base}>>>, %arg1: tile<ptr<f32>>) {{
  %v = "cuda_tile.make_tensor_view"(%{arg}) {{operandSegmentSizes = array<i32: 1, 0, 0>}} : ({bt}) -> {rt}
  return
}}"""


@pytest.mark.parametrize(
    "base, result, message",
    [
        # (base ptr_attr, result ptr_attr, tileirdisasm 13.5's message)
        (
            "none",
            None,
            "tensor_view must preserve ptr_attr from base pointer (#cuda_tile.ptr_attr<none>)",
        ),
        (None, "none", "pointer base without ptr_attr cannot produce tensor_view with ptr_attr"),
        (
            "unicast",
            "none",
            "ptr_attr mismatch between base pointer (#cuda_tile.ptr_attr<unicast>) and result "
            "tensor_view (#cuda_tile.ptr_attr<none>)",
        ),
        (
            "multicast",
            "unicast",
            "ptr_attr mismatch between base pointer (#cuda_tile.ptr_attr<multicast>) and result "
            "tensor_view (#cuda_tile.ptr_attr<unicast>)",
        ),
    ],
)
def test_make_tensor_view_must_preserve_ptr_attr(base, result, message):
    bt = f"tile<ptr<f32, <{base}>>>" if base else "tile<ptr<f32>>"
    pa = f", #cuda_tile.ptr_attr<{result}>" if result else ""
    text = GENERIC.format(
        base=base or "none",
        arg="arg0" if base else "arg1",
        bt=bt,
        rt=f"tensor_view<16xf32, strides=[1]{pa}>",
    )
    assert verify_diags(module(text)) == [
        f"t.mlir:3:8: error: 'cuda_tile.make_tensor_view' op {message}"
    ]


# ---------------------------------------------------------------------------------- bytecode


def _bytes(text: str, version: str = "13.4") -> bytes:
    return write_bytecode(module(text), version=version)


def test_bytecode_round_trip_13_4():
    for text in (STATIC, ZERO_D):
        data = _bytes(text)
        assert body(read_bytecode(data)) == text


def test_bytecode_layout_13_4():
    data = _bytes(SIMPLE)
    # ptr: tag 12, optFlags bit0, pointee type#0 (f32), PtrAttr none (0)
    assert bytes.fromhex("0c010000") in data
    # tensor_view: tag 14, optFlags 1, elem, shape [16], strides [1], PtrAttr 0
    tv = bytes.fromhex("0e0100" "01" "1000000000000000" "01" "0100000000000000" "00")
    assert tv in data
    # without a ptr_attr 13.4 still writes the (zero) optFlags varint; 13.3 writes none
    plain = "entry @k(%arg0: tile<ptr<f32>>) {\n  return\n}"
    assert bytes.fromhex("0c0000") in _bytes(plain)
    assert bytes.fromhex("0c00") in _bytes(plain, "13.3")
    assert bytes.fromhex("0c0000") not in _bytes(plain, "13.3")


def test_writer_refuses_ptr_attr_before_13_4():
    with pytest.raises(
        BytecodeWriteError,
        match=r"parameter 'ptr_attr' requires bytecode version " r"13.4\+, but targeting 13.3",
    ):
        _bytes(SIMPLE, "13.3")


def test_writer_refuses_13_5_keyword_at_13_4():
    with pytest.raises(
        BytecodeWriteError,
        match="enum value for parameter 'ptr_attr' is not " "available in bytecode version 13.4",
    ):
        _bytes(MULTICAST, "13.4")


def _patched(data: bytes, old: str, new: str) -> bytes:
    old_b, new_b = bytes.fromhex(old), bytes.fromhex(new)
    assert data.count(old_b) == 1
    return data.replace(old_b, new_b)


def _tv_patched(data: bytes, flags: int, value: int) -> bytes:
    """The (only) ``tensor_view<16xf32, ...>`` entry with optFlags / PtrAttr bytes replaced."""
    b = bytearray(data)
    i = b.index(bytes.fromhex("0e0100"))
    k = i + 4 + 8 * b[i + 3]
    k += 1 + 8 * b[k]
    b[i + 1], b[k] = flags, value
    return bytes(b)


# (patch, message): offsets are within the type entry, as tileirdisasm 13.5 reports them
BAD_TYPE_ENTRIES = [
    (("0c010001",), "error at offset 3: enum value 1 is not available in bytecode version 13.4"),
    (("0c010002",), "error at offset 3: enum value 2 is not available in bytecode version 13.4"),
    (("0c010003",), "error at offset 3: invalid integer value for enum type: 3"),
    (("0c030000",), "error at offset 3: unused bits set in optional parameter flags"),
    (("0c020000",), "error at offset 2: unused bits set in optional parameter flags"),
    ((3, 0), "error at offset 21: unused bits set in optional parameter flags"),
    ((2, 0), "error at offset 20: unused bits set in optional parameter flags"),
    ((1, 3), "error at offset 21: invalid integer value for enum type: 3"),
    ((1, 1), "error at offset 21: enum value 1 is not available in bytecode version 13.4"),
]


def _bad_entry(patch) -> bytes:
    data = _bytes(SIMPLE)
    if len(patch) == 1:
        return _patched(data, "0c010000", patch[0])
    return _tv_patched(data, *patch)


@pytest.mark.parametrize("patch, message", BAD_TYPE_ENTRIES)
def test_reader_rejects_bad_ptr_attr(patch, message):
    with pytest.raises(BytecodeError) as e:
        read_bytecode(_bad_entry(patch))
    assert str(e.value) == message


def _as_13_5(data: bytes, ptr_attr: int, tv_attr: int = None, inserts=()) -> bytes:
    """A 13.4 file of a small module whose pointers are all ``ptr<f32, <none>>`` (type#0 = f32)
    as a 13.5 file: header minor 5; PtrAttr values patched (pointer -> ``ptr_attr``, every
    tensor_view -> ``tv_attr``); ``inserts`` (body offset, bytes) spliced into the function body;
    the 13.5 function record (empty optimization hints ``0b 00`` + empty argument dictionaries
    ``06 00`` after the location), padded so every later section keeps its alignment."""
    tv_attr = ptr_attr if tv_attr is None else tv_attr
    b = bytearray(data)
    assert b[8:12] == b"\x0d\x04\x00\x00" and b[0x0C] == 0x82 and b[0x0E] == 0x08
    b[9] = 5
    i = b.index(b"\x0c\x01\x00\x00", 0x30)  # ptr: tag, optFlags 1, f32, PtrAttr
    b[i + 3] = ptr_attr
    j = i
    while (j := b.find(b"\x0e\x01\x00", j + 1)) >= 0:  # tensor_view<...xf32, ...>
        k = j + 4 + 8 * b[j + 3]
        k += 1 + 8 * b[k]
        assert b[k] == 0
        b[k] = tv_attr
    body_len, grow = b[0x15], 4
    for off, ins in sorted(inserts, reverse=True):
        b[0x16 + off : 0x16 + off] = ins
        grow, body_len = grow + len(ins), body_len + len(ins)
    assert body_len < 0x80
    b[0x15] = body_len
    pad = -grow % 8
    b[0x16 + body_len : 0x16 + body_len] = b"\xcb" * pad
    b[0x15:0x15] = b"\x0b\x00\x06\x00"
    assert b[0x0D] + grow + pad < 0x80
    b[0x0D] += grow + pad
    return bytes(b)


def test_reader_reads_13_5_multicast():
    data = _as_13_5(_bytes(SIMPLE), 2, 2)
    assert body(read_bytecode(data)) == MULTICAST


# ---------------------------------------------------------------------------------- NVIDIA


def _disasm(tmp_path, data: bytes) -> subprocess.CompletedProcess:
    path = tmp_path / "m.tileirbc"
    path.write_bytes(data)
    return subprocess.run([str(DISASM), str(path)], capture_output=True, text=True, timeout=60)


@needs_disasm
@pytest.mark.parametrize("text", [STATIC, ZERO_D, SIMPLE])
def test_printout_matches_tileirdisasm(text, tmp_path):
    nv = _disasm(tmp_path, _bytes(text))
    assert nv.returncode == 0, nv.stderr
    assert nv.stdout.strip() == text == body(module(text))


@needs_disasm
@pytest.mark.parametrize("patch, message", BAD_TYPE_ENTRIES)
def test_tileirdisasm_rejects_bad_ptr_attr_alike(patch, message, tmp_path):
    nv = _disasm(tmp_path, _bad_entry(patch))
    assert nv.returncode != 0
    assert nv.stderr.startswith(f"error: {message}\n")


@needs_disasm
def test_tileirdisasm_13_5_multicast(tmp_path):
    nv = _disasm(tmp_path, _as_13_5(_bytes(SIMPLE), 2, 2))
    assert nv.returncode == 0, nv.stderr
    assert nv.stdout.strip() == MULTICAST


@needs_disasm
def test_tileirdisasm_agrees_on_version_and_verifier_errors(tmp_path):
    nv = _disasm(tmp_path, _patched(_bytes(SIMPLE), "0c010000", "0c010001"))
    assert "error at offset 3: enum value 1 is not available in bytecode version 13.4" in nv.stderr
    for ptr_attr, tv_attr, message in [
        (
            1,
            0,
            "ptr_attr mismatch between base pointer (#cuda_tile.ptr_attr<unicast>) and result "
            "tensor_view (#cuda_tile.ptr_attr<none>)",
        ),
        (
            2,
            1,
            "ptr_attr mismatch between base pointer (#cuda_tile.ptr_attr<multicast>) and "
            "result tensor_view (#cuda_tile.ptr_attr<unicast>)",
        ),
    ]:
        data = _as_13_5(_bytes(SIMPLE), ptr_attr, tv_attr)
        nv = _disasm(tmp_path, data)
        assert nv.returncode != 0
        assert f"'cuda_tile.make_tensor_view' op {message}" in nv.stderr
        # our reader decodes it, and our verifier reports the same message
        assert verify_errors(read_bytecode(data)) == [f"'cuda_tile.make_tensor_view' op {message}"]


# ---------------------------------------------------------------------------------- interpreter


def test_interpreter_runs_views_with_ptr_attr(tmp_path):
    """ptr_attr<none> does not change memory semantics: a view built from such a pointer loads."""
    import numpy as np

    from tilegen.runtime.interp.api import load_module, run_module

    tv = "tensor_view<8xf32, strides=[1], #cuda_tile.ptr_attr<none>>"
    pv = f"partition_view<tile=(8), {tv}>"
    po = "partition_view<tile=(8), tensor_view<8xf32, strides=[1]>>"
    f = tmp_path / "k.mlir"
    f.write_text(f"""cuda_tile.module @m {{
  entry @k(%p0: tile<ptr<f32, <none>>>, %s0: tile<i32>, %t0: tile<i32>, %p1: tile<ptr<f32>>, %s1: tile<i32>, %t1: tile<i32>) {{
    %tv = make_tensor_view %p0, shape = [8], strides = [1] : tile<ptr<f32, <none>>> -> {tv}
    %ov = make_tensor_view %p1, shape = [8], strides = [1] : tensor_view<8xf32, strides=[1]>
    %pv = make_partition_view %tv : {pv}
    %po = make_partition_view %ov : {po}
    %x, %y, %z = get_tile_block_id : tile<i32>
    %t, %tok = load_view_tko weak %pv[%x] : {pv}, tile<i32> -> tile<8xf32>, token
    %s = addf %t, %t rounding<nearest_even> : tile<8xf32>
    %tok2 = store_view_tko weak %s, %po[%x] : tile<8xf32>, {po}, tile<i32> -> token
    return
  }}
}}
""")
    x = np.arange(8, dtype=np.float32)
    out = run_module(load_module(f), [("x", x), ("o", np.zeros(8, np.float32))], grid=(1,))
    assert np.array_equal(out["o"], 2 * x)


# ---------------------------------------------------------------------------------- multicast

_P = "tile<ptr<f32, <{kw}>>>"
_TV = "tensor_view<16xf32, strides=[1], #cuda_tile.ptr_attr<{kw}>>"
_PV = "partition_view<tile=(4), " + _TV + ">"
_VIEW = f"""%tv = make_tensor_view %arg0, shape = [16], strides = [1] : {_P} -> {_TV}
  %pv = make_partition_view %tv : {_PV}
  """
_CST = "%v = constant <f32: 1.000000e+00> : tile<4xf32>\n  "
_CST0 = "%v = constant <f32: 1.000000e+00> : tile<f32>\n  "
# (op, body, tileirdisasm 13.5's message for a multicast pointer / view)
MULTICAST_CASES = [
    (
        "load_view_tko",
        _VIEW
        + f"%t, %tok = load_view_tko weak %pv[%arg1] : {_PV}, tile<i32> -> tile<4xf32>, token",
        "multicast ptr_attr is not allowed",
    ),
    (
        "store_view_tko",
        _VIEW
        + _CST
        + f"%tok = store_view_tko weak %v, %pv[%arg1] : tile<4xf32>, {_PV}, tile<i32> -> token",
        "multicast ptr_attr is not allowed",
    ),
    (
        "atomic_red_view_tko",
        _VIEW
        + _CST
        + f"%tok = atomic_red_view_tko relaxed device %pv[%arg1], addf, %v : tile<4xf32>, {_PV}, tile<i32> -> token",
        "multicast ptr_attr is not allowed",
    ),
    (
        "load_ptr_tko",
        f"%x, %tok = load_ptr_tko weak %arg0 : {_P} -> tile<f32>, token",
        "multicast pointer is not allowed",
    ),
    (
        "store_ptr_tko",
        _CST0 + f"%tok = store_ptr_tko weak %arg0, %v : {_P}, tile<f32> -> token",
        "multicast pointer is not allowed",
    ),
    (
        "atomic_rmw_tko",
        _CST0
        + f"%r, %tok = atomic_rmw_tko relaxed device %arg0, addf, %v : {_P}, tile<f32> -> tile<f32>, token",
        "multicast pointer is not supported for atomic_rmw",
    ),
    (
        "atomic_cas_tko",
        _CST0
        + f"%r, %tok = atomic_cas_tko relaxed device %arg0, %v, %v : {_P}, tile<f32> -> tile<f32>, token",
        "multicast pointer is not supported for atomic_cas",
    ),
]


def _multicast_module(body: str, kw: str):
    text = f"entry @k(%arg0: {_P}, %arg1: tile<i32>) {{\n  {body}\n  return\n}}"
    return module(text.replace("{kw}", kw))


@pytest.mark.parametrize("op, body, message", MULTICAST_CASES, ids=[c[0] for c in MULTICAST_CASES])
def test_multicast_is_rejected(op, body, message):
    assert verify_errors(_multicast_module(body, "none")) == []
    assert verify_errors(_multicast_module(body, "unicast")) == []
    assert verify_errors(_multicast_module(body, "multicast")) == [f"'cuda_tile.{op}' op {message}"]


@needs_disasm
@pytest.mark.parametrize("op, body, message", MULTICAST_CASES, ids=[c[0] for c in MULTICAST_CASES])
def test_multicast_rules_match_tileirdisasm(op, body, message, tmp_path):
    data = write_bytecode(_multicast_module(body, "none"), version="13.4")
    inserts = ()
    if op == "atomic_red_view_tko":  # 13.5 adds `inbounds` (count + bools) after `mode` (addf = 4)
        at = data.index(bytes.fromhex("7501")) + 7 - 0x16
        assert data[0x16 + at - 1] == 4
        inserts = ((at, b"\x01\x00"),)
    for value, kw in ((1, "unicast"), (2, "multicast")):
        patched = _as_13_5(data, value, inserts=inserts)
        nv = _disasm(tmp_path, patched)
        ours = read_bytecode(patched)
        if kw == "unicast":
            assert nv.returncode == 0, nv.stderr
            assert nv.stdout.strip() == body_of_entry(ours)
            assert verify_errors(ours) == []
        else:
            assert f"error: 'cuda_tile.{op}' op {message}\n" in nv.stderr
            assert verify_errors(ours) == [f"'cuda_tile.{op}' op {message}"]


def body_of_entry(m) -> str:
    return body(m)


# ---------------------------------------------------------------------------------- multimem (13.5)

_MM = {
    "multimem_store_view_tko": "%t1 = multimem_store_view_tko relaxed device %pview, %cst_1_f16[%arg1, %arg1] "
    "inbounds = [true, true] : {PV}, tile<4x4xf16>, tile<i32> -> token",
    "multimem_reduce_view_tko": "%t1 = multimem_reduce_view_tko relaxed sys %pview, %cst_1_f16[%arg1, %arg1] "
    "inbounds = [false, true] : {PV}, tile<4x4xf16>, tile<i32> -> token",
    "multimem_load_reduce_view_tko": "%reduced_values, %result_token = multimem_load_reduce_view_tko relaxed sys "
    "%pview[%arg1, %arg1] inbounds = [true, false] : {PV}, tile<i32> -> tile<4x4xf16>, token",
}


def _multimem_text(op: str, kw) -> str:
    p = f"tile<ptr<f16, <{kw}>>>" if kw else "tile<ptr<f16>>"
    pa = f", #cuda_tile.ptr_attr<{kw}>" if kw else ""
    tv = f"tensor_view<16x16xf16, strides=[16,1]{pa}>"
    pv = f"partition_view<tile=(4x4), {tv}>"
    mk = f"{p} -> {tv}" if kw else tv
    return (
        f"entry @k(%arg0: {p}, %arg1: tile<i32>) {{\n"
        f"  %tview = make_tensor_view %arg0, shape = [16, 16], strides = [16, 1] : {mk}\n"
        f"  %pview = make_partition_view %tview : {pv}\n"
        "  %cst_1_f16 = constant <f16: 1.000000e+00> : tile<4x4xf16>\n"
        f"  {_MM[op].replace('{PV}', pv)}\n"
        "  return\n}"
    )


def _write_13_5(monkeypatch, m) -> bytes:
    """BC's writer encodes 13.5 (function record, multimem ops) but does not offer it yet."""
    from tilegen.runtime.bytecode import layouts as L

    monkeypatch.setattr(L, "WRITE_VERSIONS", L.WRITE_VERSIONS + ["13.5"])
    return write_bytecode(m, version="13.5")


@pytest.mark.parametrize("op", sorted(_MM))
def test_multimem_requires_multicast(op):
    assert verify_errors(module(_multimem_text(op, "multicast"))) == []
    for kw in (None, "none", "unicast"):
        assert verify_errors(module(_multimem_text(op, kw))) == [
            f"'cuda_tile.{op}' op expected a multicast pointer, but got {kw or 'none'}"
        ]


@needs_disasm
@pytest.mark.parametrize("op", sorted(_MM))
def test_multimem_rules_match_tileirdisasm(op, tmp_path, monkeypatch):
    for kw in (None, "none", "unicast", "multicast"):
        text = _multimem_text(op, kw)
        m = module(text)
        data = _write_13_5(monkeypatch, m)
        nv = _disasm(tmp_path, data)
        if kw == "multicast":
            assert nv.returncode == 0, nv.stderr
            assert nv.stdout.strip() == body(m) == body(read_bytecode(data))
        else:
            message = f"'cuda_tile.{op}' op expected a multicast pointer, but got {kw or 'none'}"
            assert nv.stderr.startswith(f"error: {message}\n")
            assert verify_errors(read_bytecode(data)) == [message]
