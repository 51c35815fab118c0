"""Hostile bytecode: tilegen's reader refuses what NVIDIA's reader refuses, with NVIDIA's message.

Every file here is written by tilegen's own writer from IR the verifier never saw (no
NVIDIA-built file is committed): a type NVIDIA's reader builds with its checked constructors
(shapes, strides, element counts, partition tiles, dim maps, paddings, gather dimensions,
element types), or a field patched to a value NVIDIA checks. The expected messages are what
``tileirdisasm`` 13.5 printed for the same bytes; where it is installed, each case is also run
through it and must print the same first error. The last test compares verdicts on mutants of
the cuTile corpus (generated here, deterministically) with ``tileirdisasm``'s.
"""

from __future__ import annotations

import importlib.util
import itertools
import random
import re
from pathlib import Path

import pytest

from bytecode_helpers import (
    module_with_arg_type,
    nvidia_first_error,
    nvidia_tool,
)
from tilegen.runtime import types as ty
from tilegen.runtime.asm import parse_module
from tilegen.runtime.bytecode import BytecodeError, read_bytecode, write_bytecode
from tilegen.runtime.bytecode import varint as V

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("fuzz_bytecode", REPO / "bench" / "fuzz_bytecode.py")
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)

NVIDIA = nvidia_tool("tileirdisasm")
needs_nvidia = pytest.mark.skipif(NVIDIA is None, reason="NVIDIA's tileirdisasm not installed")

F32, I32 = ty.element_type_from_name("f32"), ty.element_type_from_name("i32")
F4 = ty.element_type_from_name("f4E2M1FN")
D = ty.DYNAMIC
TV1 = ty.TensorViewType(F32, (D,), (1,))
TV2 = ty.TensorViewType(F32, (D, D), (D, 1))
TV1_I32 = ty.TensorViewType(I32, (D,), (1,))
PV, SV, GV, TV, TT = (
    ty.PartitionViewType,
    ty.StridedViewType,
    ty.GatherScatterViewType,
    ty.TensorViewType,
    ty.TileType,
)

#: (id, argument type, bytecode version, NVIDIA's first message). Offsets are within the type
#: entry, counted from the byte after its tag, at the last byte read (as tileirdisasm reports).
TYPE_RULES = [
    ("tile-zero", TT((0,), F32), "13.4", "all dimensions must be positive constants, got 0", 10),
    (
        "tile-negative",
        TT((-1,), F32),
        "13.4",
        "all dimensions must be positive constants, got -1",
        10,
    ),
    (
        "tile-int-min",
        TT((-(2**31),), F32),
        "13.4",
        "all dimensions must be positive constants, got -2147483648",
        10,
    ),
    (
        "tile-zero-2d",
        TT((4, 0), F32),
        "13.4",
        "all dimensions must be positive constants, got 4, 0",
        18,
    ),
    ("tile-not-pow2", TT((3,), F32), "13.4", "all dimensions must be powers of two, got 3", 10),
    (
        "tile-not-pow2-2d",
        TT((2, 3), F32),
        "13.4",
        "all dimensions must be powers of two, got 2, 3",
        18,
    ),
    (
        "tile-too-many-elements",
        TT((8192, 4096), F32),
        "13.4",
        "tile would exceed the maximum of 16777216 elements",
        18,
    ),
    (
        "tile-huge-dim",
        TT((2**40,), F32),
        "13.4",
        "tile would exceed the maximum of 16777216 elements",
        10,
    ),
    (
        "tile-f4-odd",
        TT((1,), F4),
        "13.4",
        "F4E2M1FN tiles must have an even number of elements",
        10,
    ),
    (
        "tensor-view-size",
        TV(F32, (0,), (1,)),
        "13.4",
        "dimensions must have strictly positive constant sizes but got [0]",
        20,
    ),
    (
        "tensor-view-negative-size",
        TV(F32, (-1,), (1,)),
        "13.4",
        "dimensions must have strictly positive constant sizes but got [-1]",
        20,
    ),
    (
        "tensor-view-stride-zero",
        TV(F32, (4,), (0,)),
        "13.4",
        "dimensions must have strictly positive constant strides but got [0]",
        20,
    ),
    (
        "tensor-view-stride-negative",
        TV(F32, (4,), (-1,)),
        "13.4",
        "dimensions must have strictly positive constant strides but got [-1]",
        20,
    ),
    (
        "tensor-view-rank",
        TV(F32, (4, 4), (1,)),
        "13.4",
        "expected shape and stride to be of same rank but got shape of rank 2 and stride of rank 1",
        28,
    ),
    (
        "tensor-view-0d-strides",
        TV(F32, (), (1,)),
        "13.4",
        "expected shape and stride to be of same rank but got shape of rank 0 and stride of rank 1",
        12,
    ),
    ("partition-0d", PV((), TV(F32, (), ())), "13.4", "0-dimension tile shape is not supported", 4),
    (
        "partition-rank",
        PV((4,), TV2, (0,)),
        "13.4",
        "expected tensor_view rank and tile rank to match, got tensor_view of rank 2 and tiles of "
        "rank 1",
        12,
    ),
    (
        "partition-no-dim-map",
        PV((4,), TV1, ()),
        "13.4",
        "expected dim_map to map exactly all 1 dimensions of the tile, got 0 mappings",
        8,
    ),
    (
        "partition-dim-map-count",
        PV((4, 4), TV2, (0,)),
        "13.4",
        "expected dim_map to map exactly all 2 dimensions of the tile, got 1 mappings",
        16,
    ),
    (
        "partition-tile-zero",
        PV((0,), TV1, (0,)),
        "13.4",
        "tile shape dimensions must have positive length but got [0]",
        12,
    ),
    (
        "partition-tile-negative",
        PV((-4,), TV1, (0,)),
        "13.4",
        "tile shape dimensions must have positive length but got [-4]",
        12,
    ),
    (
        "partition-tile-not-pow2",
        PV((3,), TV1, (0,)),
        "13.4",
        "tile shape dimensions must have power of two length but got [3]",
        12,
    ),
    (
        "partition-tile-i32-max",
        PV((2**31 - 1,), TV1, (0,)),
        "13.4",
        "tile shape dimensions must have power of two length but got [2147483647]",
        12,
    ),
    (
        "partition-tile-elements",
        PV((2**30,), TV1, (0,)),
        "13.4",
        "tile would exceed the maximum of 16777216 elements",
        12,
    ),
    (
        "partition-tile-elements-2d",
        PV((4096, 8192), TV2, (0, 1)),
        "13.4",
        "tile would exceed the maximum of 16777216 elements",
        20,
    ),
    (
        "dim-map-negative",
        PV((4,), TV1, (-1,)),
        "13.4",
        "target dimension must not be negative, got -1",
        12,
    ),
    (
        "dim-map-outside",
        PV((4,), TV1, (1,)),
        "13.4",
        "target dimension is outside of tensor view dimensions, expected strictly less than 1, "
        "got 1",
        12,
    ),
    (
        "dim-map-i32-max",
        PV((4,), TV1, (2**31 - 1,)),
        "13.4",
        "target dimension is outside of tensor view dimensions, expected strictly less than 1, "
        "got 2147483647",
        12,
    ),
    (
        "dim-map-twice",
        PV((4, 4), TV2, (0, 0)),
        "13.4",
        "target dimension 0 mapped at least twice (for tile dimensions 0 and 1)",
        20,
    ),
    (
        "padding-float-only",
        PV((4,), TV1_I32, (0,), "nan"),
        "13.4",
        "padding_value nan can only be used with floating point element types, got 'i32'",
        13,
    ),
    (
        "padding-float-only-inf",
        PV((4,), TV1_I32, (0,), "pos_inf"),
        "13.4",
        "padding_value pos_inf can only be used with floating point element types, got 'i32'",
        13,
    ),
    (
        "strided-traversal-zero",
        SV((4,), (0,), TV1, (0,)),
        "13.3",
        "traversal strides must be strictly positive but got [0]",
        17,
    ),
    (
        "strided-traversal-negative",
        SV((4,), (-1,), TV1, (0,)),
        "13.3",
        "traversal strides must be strictly positive but got [-1]",
        17,
    ),
    (
        "strided-traversal-count",
        SV((4,), (1, 1), TV1, (0,)),
        "13.3",
        "expected 1 traversal strides, got 2",
        21,
    ),
    (
        "strided-tile-zero",
        SV((0,), (1,), TV1, (0,)),
        "13.3",
        "tile shape dimensions must have positive length but got [0]",
        17,
    ),
    (
        "gather-sparse-dim",
        GV((4,), TV1, 3),
        "13.3",
        "gather dimension is outside of tensor view dimensions, expected strictly less than 1, "
        "got 3",
        8,
    ),
    (
        "gather-sparse-dim-u32-max",
        GV((4,), TV1, 2**32 - 1),
        "13.3",
        "gather dimension is outside of tensor view dimensions, expected strictly less than 1, "
        "got 4294967295",
        12,
    ),
    (
        "gather-tile-zero",
        GV((0,), TV1, 0),
        "13.3",
        "tile shape dimensions must have positive length but got [0]",
        8,
    ),
    (
        "gather-tile-not-pow2",
        GV((3,), TV1, 0),
        "13.3",
        "tile shape dimensions must have power of two length but got [3]",
        8,
    ),
    (
        "gather-rank",
        GV((4,), TV2, 1),
        "13.3",
        "expected tensor_view rank and tile rank to match, got tensor_view of rank 2 and tiles of "
        "rank 1",
        8,
    ),
]


def _type_case(case):
    name, t, version, message, offset = case
    return module_with_arg_type(t, version), f"error at offset {offset}: {message}"


@pytest.mark.parametrize("case", TYPE_RULES, ids=[c[0] for c in TYPE_RULES])
def test_reader_refuses_invalid_type_with_nvidias_message(case):
    data, message = _type_case(case)
    with pytest.raises(BytecodeError) as e:
        read_bytecode(data, "k.tileirbc")
    assert e.value.messages[0] == message


@needs_nvidia
@pytest.mark.parametrize("case", TYPE_RULES, ids=[c[0] for c in TYPE_RULES])
def test_nvidia_refuses_the_same_type_the_same_way(case, tmp_path):
    data, message = _type_case(case)
    rc, first = nvidia_first_error(data, tmp_path)
    assert (rc, first) == (3, message)


def test_type_failure_cascade_matches_nvidia():
    """The whole cascade of a bad parameter type of the function signature."""
    data = module_with_arg_type(TT((0,), F32))
    with pytest.raises(BytecodeError) as e:
        read_bytecode(data, "k.tileirbc")
    end = f"error at offset {len(data)}: "
    assert e.value.messages == [
        "error at offset 10: all dimensions must be positive constants, got 0",
        "error at offset 2: failed to get parameter type",
        f"{end}failed to parse type at index 2 for function 'k",
        f"{end}failed to create function from bytecode",
    ]


def _unverified(text: str, version: str = "13.4") -> bytes:
    return write_bytecode(parse_module(text, "k.mlir", verify_types=False), version)


def test_bad_result_type_of_an_op():
    """A tile of 0 elements as a constant's type: refused by the reader (it reached a verifier
    hook that divides by the dimension before)."""
    data = _unverified(
        "cuda_tile.module @kernels {\n  entry @k() {\n"
        "    %c = constant <f32: 1.0> : tile<0xf32>\n    return\n  }\n}\n"
    )
    with pytest.raises(BytecodeError) as e:
        read_bytecode(data, "k.tileirbc")
    assert e.value.messages[:2] == [
        "error at offset 10: all dimensions must be positive constants, got 0",
        "error at offset 2: failed to get result type 0 for ConstantOp",
    ]


@pytest.mark.parametrize(
    "arg_type, text",
    [
        (TV(F32, (4,), (1,)), "!cuda_tile.tensor_view<4xf32, strides=[1]>"),
        (ty.TokenType(), "!cuda_tile.token"),
        (ty.PointerType(F32), "!cuda_tile.ptr<f32>"),
    ],
)
def test_entry_arguments_must_be_tiles(arg_type, text):
    with pytest.raises(BytecodeError) as e:
        read_bytecode(module_with_arg_type(arg_type), "k.tileirbc")
    assert e.value.messages == [
        f"unsupported type in bytecode for entry argument #0: '{text}'; expected a rank-0 "
        "!cuda_tile.tile type",
        "deserialized module does not conform to bytecode format invariants",
    ]


# --------------------------------------------------------------------------- patched fields

VEC_ADD = (REPO / "examples" / "vec_add.mlir").read_text()


def _vec_add() -> bytes:
    return write_bytecode(parse_module(VEC_ADD, "vec_add.mlir", no_implicit_module=True), "13.4")


def _field(data: bytes, what: str, nth: int = 0) -> tuple[int, int]:
    """(offset, length) of the ``nth`` field the reader reads with failure message ``what``."""
    V.TRACE = []
    try:
        read_bytecode(data)
    finally:
        fields, V.TRACE = V.TRACE, None
    hits = [(off, n) for off, n, _kind, w in fields if w == what]
    return hits[nth]


def _patch(data: bytes, what: str, new: bytes, nth: int = 0, was: bytes = b"") -> bytes:
    """``data`` with the ``nth`` field read with message ``what`` (among those whose bytes
    start with ``was``) replaced by ``new``."""
    V.TRACE = []
    try:
        read_bytecode(data)
    finally:
        fields, V.TRACE = V.TRACE, None
    hits = [(o, n) for o, n, _k, w in fields if w == what and data[o:].startswith(was)]
    off, n = hits[nth]
    return data[:off] + new + data[off + n :]


def _first_error(data: bytes) -> str:
    with pytest.raises(BytecodeError) as e:
        read_bytecode(data, "k.tileirbc")
    return e.value.messages[0]


VEC_ADD_NAME = "vec_add_Kt1_A1f32_1t1_p16_A1f32_1t1_p16_A1f32_1t1_p16_I256"


def _patched_cases():
    base = _vec_add()
    return [
        (
            "function-flag-bits",
            _patch(base, "failed to read function flags", b"\x7f"),
            "function entry has unrecognized flag bits (0x78);",
        ),
        (
            "function-location-without-debug-section",
            _patch(base, "failed to read function location", b"\x10"),
            f"error at offset {len(base)}: failed to read function location for '{VEC_ADD_NAME}'",
        ),
        (
            "assume-predicate-not-a-predicate",
            _patch(
                base,
                "failed to read AttributeTag for self-contained attribute.",
                b"\x03",
                0,
                b"\x08",
            ),
            "failed to cast parsed attribute to AssumePredicateAttrInterface",
        ),
        (
            "unsupported-version",
            base[:8] + bytes([18, 0, 0, 0]) + base[12:],
            "error at offset 12: unsupported Tile version 18.0.0, this reader supports versions "
            "[13.1 - 13.5]",
        ),
        (
            "version-tag-bits",
            base[:8] + bytes([13, 4, 6, 0]) + base[12:],
            "error at offset 12: header has unrecognized version tag bits (0x6);",
        ),
        (
            "section-without-alignment-flag",
            base[:12] + bytes([base[12] & 0x7F]) + base[13:],
            "section 2 must have alignment that is a multiple of 8 bytes",
        ),
    ]


@pytest.mark.parametrize("index", range(6), ids=[c[0] for c in _patched_cases()])
def test_patched_field_refused_as_nvidia_does(index, tmp_path):
    name, data, message = _patched_cases()[index]
    first = _first_error(data)
    assert message in first
    if NVIDIA is not None:
        rc, nv_first = nvidia_first_error(data, tmp_path)
        assert rc == 3 and nv_first == first


def _section_length_cases():
    """Files cut inside the first section: NVIDIA compares the section length with the bytes
    left before it reads the alignment and skips the padding, then again after."""
    base = _vec_add()
    off, n = _field(base, "failed to read section length")  # the string section's length
    length = V.Cursor(base, off).varint()
    payload = off + n + 1  # one alignment byte; the payload is already aligned
    return base, [
        (
            base[: off + n],
            f"error at offset {off + n}: section length {length} exceeds " f"remaining data size 0",
        ),
        (
            base[: off + n + 1],
            f"error at offset {off + n}: section length {length} exceeds " f"remaining data size 1",
        ),
        (
            base[: payload + length - 2],
            f"error at offset {off + n}: section length {length} "
            f"exceeds remaining data size {length - 1}",
        ),
        (
            base[: payload + length - 1],
            f"error at offset {payload}: section length {length} "
            f"exceeds remaining bytecode data. {length - 1}",
        ),
    ]


@pytest.mark.parametrize("index", range(4))
def test_truncated_section_offsets(index, tmp_path):
    """(tilegen reported these one byte later than tileiras before)."""
    _, cases = _section_length_cases()
    data, message = cases[index]
    assert _first_error(data) == message
    if NVIDIA is not None:
        assert nvidia_first_error(data, tmp_path) == (3, message)


def test_bounded_and_div_by_flags_are_varints():
    """NVIDIA reads the flags of BoundedAttr/DivByAttr as varints: 0x80 0x00 is 0 (accepted),
    unknown bits are reported after the fields the flags announce."""
    base = _vec_add()
    what = "failed to read flags byte for BoundedAttr"
    off, _ = _field(base, what)
    assert base[off : off + 2] == b"\x01\x00"  # bounded<0, ?>: lower bound 0
    read_bytecode(base[:off] + b"\x80" + base[off + 1 :])  # 0x80 0x00: no bounds
    assert _first_error(base[:off] + b"\x04" + base[off + 1 :]).endswith(
        "unused bits set in optional parameter flags"
    )


def test_apint_bits_must_fit_the_float():
    """A FloatAttr's bits are the zig-zag of the zero-extended value: -1 never fits 32 bits."""
    text = (
        "cuda_tile.module @kernels {\n  entry @k() {\n"
        "    %c = constant <f32: 1.0> : tile<4xf32>\n"
        "    %r = reduce %c dim=0 identities=[0.000000e+00 : f32] : tile<4xf32> -> tile<f32>\n"
        "    (%a: tile<f32>, %b: tile<f32>) {\n      %s = addf %a, %b : tile<f32>\n"
        "      yield %s : tile<f32>\n    }\n    return\n  }\n}\n"
    )
    base = _unverified(text)
    bad = _patch(base, "failed to read signed varint for APInt (<= 64 bits).", b"\x01")
    assert _first_error(bad).endswith("value 18446744073709551615 does not fit in 32 bits")


def test_string_offsets_clamp_like_stringref_substr():
    """A string whose end offset lies before its start runs to the end of the string data, and
    one past the data is empty (NVIDIA's StringRef::substr clamps); other tables refuse."""
    from tilegen.runtime.bytecode.reader import _Table

    strings = _Table(3, [0, 5, 2], memoryview(b"abcdefgh"), "strings")
    assert bytes(strings.span(1)) == b"fgh"
    assert bytes(_Table(2, [10, 12], memoryview(b"abc"), "strings").span(0)) == b""
    with pytest.raises(BytecodeError):
        _Table(3, [0, 5, 2], memoryview(b"abcdefgh"), "types").span(1)


# --------------------------------------------------------------------------- differential

CORPUS = fuzz.named_seeds()


def _mutants(count_random: int, sweep_stride: int):
    """Deterministic mutants of the corpus: random ones, and every ``sweep_stride``-th field
    sweep mutant of three files."""
    pool = [c for c in CORPUS if c[0].endswith(".tileirbc")]
    rng = random.Random(17)
    for i in range(count_random):
        name, data = pool[rng.randrange(len(pool))]
        yield name, fuzz.mutate(data, random.Random(i))
    for name, data in pool[:: max(1, len(pool) // 3)][:3]:  # shuffled fields: all kinds
        for k, (mutant, _note) in enumerate(fuzz.sweep(data, random.Random(len(data)))):
            if k % sweep_stride == 0:
                yield name, mutant


@needs_nvidia
@pytest.mark.skipif(not CORPUS, reason="the cuTile corpus (../shared) is not available")
def test_tilegen_rejects_every_mutant_nvidia_rejects(tmp_path):
    """Verdicts of tilegen's and NVIDIA's readers (read + verify, as ``tilegen disasm`` and
    ``tileirdisasm``) on corpus mutants: every mutant NVIDIA rejects is rejected by tilegen
    with a located diagnostic, and the first messages mostly agree word for word."""
    nv_rejected = same = 0
    misses = []
    for name, data in itertools.islice(_mutants(250, 40), 700):
        nv_ok, nv_errors = fuzz.nvidia_verdict(data, NVIDIA, str(tmp_path))
        tg_ok, tg_errors = fuzz.tilegen_verdict(data, "m.tileirbc")
        assert not any("internal error" in e for e in tg_errors), tg_errors
        if nv_ok:
            continue
        nv_rejected += 1
        if tg_ok:
            misses.append((name, nv_errors[:1]))
            continue
        identical = bool(nv_errors) and fuzz._message(tg_errors[0]) == fuzz._message(nv_errors[0])
        # located: the file (with the reader's byte offset where NVIDIA's reader has one), or
        # the op's debug location, or exactly what NVIDIA says (an op without a location)
        located = tg_errors[0].startswith("m.tileirbc: error: ")
        assert identical or located or re.match(r"\S+:\d+:\d+: error: ", tg_errors[0]), tg_errors
        if tg_errors[0].startswith("m.tileirbc: error: error at offset"):
            raise AssertionError(f"offset not parsed by the driver: {tg_errors[0]}")
        same += identical
    assert nv_rejected > 300
    assert misses == []
    assert same >= 0.85 * nv_rejected, (same, nv_rejected)


def test_function_flag_bits_are_checked_from_13_4_on():
    """NVIDIA's reader ignores unknown function flag bits in 13.1-13.3 files."""
    for version, refused in (("13.1", False), ("13.3", False), ("13.4", True)):
        base = write_bytecode(
            parse_module(VEC_ADD, "vec_add.mlir", no_implicit_module=True), version
        )
        off, _ = _field(base, "failed to read function flags")
        data = base[:off] + bytes([base[off] | 0x08]) + base[off + 1 :]
        if refused:
            assert _first_error(data).endswith("function entry has unrecognized flag bits (0x8);")
        else:
            read_bytecode(data)
