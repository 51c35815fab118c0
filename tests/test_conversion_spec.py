"""The conversion spec: coverage of the cuda_tile roster, group order, rows that resolve."""

from __future__ import annotations

from tilegen.runtime.conversion.declared import ConversionContext, compile_groups, coverage
from tilegen.runtime.conversion.driver import load_spec, parse_target
from tilegen.runtime.opdef import all_ops

from spec_facts import spec_op_names


def _ctx() -> ConversionContext:
    return ConversionContext(load_spec(), 90)


def test_every_cuda_tile_op_is_covered():
    covered, missing = coverage(_ctx())
    every = {o.name for o in all_ops() if o.dialect == "cuda_tile"}
    assert not missing
    assert covered == every
    public = {o.name for o in all_ops() if o.dialect == "cuda_tile" and not o.test_only}
    assert public == spec_op_names("cuda_tile")


def test_groups_run_in_seed_order_and_compile():
    groups = compile_groups(_ctx())
    assert [name for name, _ in groups] == ["part_a", "part_b", "part_c"]
    part_c = dict(groups)["part_c"]
    assert set(part_c.patterns) == {
        "cuda_tile.mmaf",
        "cuda_tile.mmai",
        "cuda_tile.mmaf_scaled",
        "cuda_tile.reduce",
        "cuda_tile.scan",
    }


def test_targets_parse():
    assert parse_target("sm_90") == 90
    assert parse_target("sm_100a") == 100
    assert parse_target("9.0") == 90
    assert parse_target("120") == 120
    for bad in ("", "sm_", "sm_9x", "gfx90a", None):
        assert parse_target(bad) is None


def test_default_rule_renames_same_mnemonic_ops():
    from tilegen.runtime.conversion.declared import default_renames

    ctx = _ctx()
    rows = {ctx.full(r["root"], "cuda_tile") for g in ctx.spec["groups"] for r in g["patterns"]}
    renames = default_renames(ctx, rows)
    assert renames["cuda_tile.cat"] == "nv_tileaa.cat"
    assert renames["cuda_tile.assume"] == "nv_tileaa.assume"
    assert "cuda_tile.return" not in renames  # its own row, in part B
    assert all(k.split(".")[1] == v.split(".")[1] for k, v in renames.items())
