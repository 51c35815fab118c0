"""The spec covers every public op of NVIDIA's reference inventory with matching names and opcodes."""

import json

import pytest

from tilegen.runtime.opdef import all_ops, lookup_opdef

from paths import REFERENCE as SHARED  # ../shared or $TILEGEN_SHARED


def _reference_ops():
    ops = json.loads((SHARED / "ops.json").read_text())
    ops += json.loads((SHARED / "ops_13_4.json").read_text())["new_ops"]
    return ops


needs_reference = pytest.mark.skipif(not SHARED.exists(), reason="../shared/reference not present")


@needs_reference
def test_every_reference_op_is_in_the_spec():
    ref = _reference_ops()
    assert ref and len({r["op_name"] for r in ref}) == len(ref)  # no duplicates
    for r in ref:
        d = lookup_opdef(r["op_name"])
        assert d is not None, r["op_name"]
        assert d.mnemonic == r["mnemonic"]
        assert d.opcode == r["opcode"], r["mnemonic"]
        assert [o.name for o in d.operands] == [o["name"] for o in r["operands"]], r["mnemonic"]
        assert [o.name for o in d.results] == [o["name"] for o in r["results"]], r["mnemonic"]
        ref_attrs = [a["name"] for a in r["attributes"]]
        # 13.4 additions (ops_13_4.json changed_ops) may only append attributes
        assert [a.name for a in d.attributes][: len(ref_attrs)] == ref_attrs or set(ref_attrs) <= {
            a.name for a in d.attributes
        }, r["mnemonic"]


@needs_reference
def test_13_4_attribute_additions_are_versioned():
    changed = json.loads((SHARED / "ops_13_4.json").read_text())["changed_ops"]
    for c in changed:
        for ch in c["changes"]:
            if ch.get("field_kind") == "attribute" and "entry" in ch:
                a = lookup_opdef(f"cuda_tile.{c['mnemonic']}").attr(ch["entry"]["name"])
                assert a is not None and a.since == ch["since"]


def test_pow_prints_as_fpowf_from_13_4():
    assert lookup_opdef("cuda_tile.fpowf") is lookup_opdef("cuda_tile.pow")


def test_no_duplicate_opcodes():
    codes = [o.opcode for o in all_ops() if o.opcode is not None]
    assert len(codes) == len(set(codes))
