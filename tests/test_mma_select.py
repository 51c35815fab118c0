"""Tensor-core instruction selection (spec/ptx/mma.yaml via runtime/layouts/mma_select.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tilegen.runtime.layouts.mma import DotOperandLayout, MmaLayout
from tilegen.runtime.layouts.mma_select import (
    MmaSelectError,
    candidates,
    load_table,
    select_mma,
    table,
)
from tilegen.runtime.ptx.sim.declared import match
from tilegen.runtime.ptx.sim.tensor_ops import SHAPES

TILEIRAS = Path(sys.prefix) / "lib/python3.11/site-packages/nvidia/cu13/bin/tileiras"
from paths import CORPUS_OUT as CORPUS  # ../shared or $TILEGEN_SHARED


@pytest.mark.parametrize(
    "a,c,sm,want",
    [
        ("f16", "f32", 80, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
        ("f16", "f16", "sm_120", "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"),
        ("bf16", "f32", "sm_90a", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
        ("tf32", "f32", 86, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
        ("f64", "f64", 100, "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"),
        ("f8E4M3FN", "f32", 89, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"),
        ("f8E5M2", "f16", 120, "mma.sync.aligned.m16n8k32.row.col.f16.e5m2.e5m2.f16"),
        ("f32", "f32", 80, "fma.rn.f32"),
    ],
)
def test_select_mma_sync(a, c, sm, want) -> None:
    row = select_mma(a, a, c, sm)
    assert row.opcode() == want


def test_integer_signedness_picks_the_ptx_types() -> None:
    assert select_mma("i8", "i8", "i32", 80).opcode().endswith(".s32.s8.s8.s32")
    assert (
        select_mma("i8", "i8", "i32", 80, signed=(False, True)).opcode().endswith(".s32.u8.s8.s32")
    )
    assert ".u8.u8." in select_mma("i8", "i8", "i32", "sm_89", signed=(0, 0)).opcode()


def test_unsupported_type_message_is_tileiras_text() -> None:
    for sm in (80, "sm_86", "sm_87"):
        with pytest.raises(MmaSelectError) as e:
            select_mma("f8E4M3FN", "f8E4M3FN", "f32", sm)
        n = str(sm).removeprefix("sm_")
        assert (
            str(e.value)
            == f"Incompatibility with architecture 'sm_{n}': unsupported type 'f8E4M3FN'"
        )
    with pytest.raises(MmaSelectError, match="unsupported type 'f8E5M2'"):
        select_mma("f8E5M2", "f8E5M2", "f16", 80)


def test_other_bad_requests_are_diagnosed() -> None:
    with pytest.raises(MmaSelectError, match="same element type"):
        select_mma("f8E4M3FN", "f8E5M2", "f32", 89)
    with pytest.raises(MmaSelectError, match="element type 'f4E2M1FN'"):
        select_mma("f4E2M1FN", "f4E2M1FN", "f32", 100)
    with pytest.raises(MmaSelectError, match=r"no mma.sync instruction for bf16 x bf16 -> f16"):
        select_mma("bf16", "bf16", "f16", 80)
    with pytest.raises(MmaSelectError, match="unknown GPU target"):
        select_mma("f16", "f16", "f32", "ampere")
    with pytest.raises(MmaSelectError, match="unknown mma family"):
        select_mma("f16", "f16", "f32", 90, family="hmma")
    with pytest.raises(MmaSelectError, match="no wgmma instruction"):
        select_mma("f16", "f16", "f32", 80, family="wgmma")
    with pytest.raises(MmaSelectError, match="needs an N"):
        select_mma("f16", "f16", "f32", 90, family="wgmma").opcode()


def test_wgmma_and_tcgen05_rows_are_separate() -> None:
    w = select_mma("f16", "f16", "f32", "sm_90a", family="wgmma")
    assert w.opcode(64) == "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"
    assert select_mma("f16", "f16", "f32", 90).family == "mma.sync"
    fams = {r.family for r in candidates("f16", "f16", "f32", 100)}
    assert fams == {"mma.sync", "tcgen05"}
    assert {r.family for r in candidates("f16", "f16", "f32", 120)} == {"mma.sync"}


def test_every_mma_sync_row_is_simulated_and_has_a_layout() -> None:
    ptx_type = {
        "f16": "f16",
        "bf16": "bf16",
        "tf32": "tf32",
        "f64": "f64",
        "f8E4M3FN": "e4m3",
        "f8E5M2": "e5m2",
        "i8": "s8",
    }
    for row in table().rows:
        if row.family != "mma.sync":
            continue
        m, n, k = row.mnk()
        assert row.c in SHAPES[(row.shape, ptx_type[row.a])] or row.c == "i32"
        assert match(row.ptx) is not None and match(row.ptx).handwritten
        acc = MmaLayout(2, (1, 1), (m, n))
        assert DotOperandLayout(0, acc, row.k_width).instr_k == k
        assert row.sm_min >= 80 and set(row.observed) <= {80, 86, 89, 90, 100, 120}
        assert all(row.supports(s) for s in row.observed)


def test_loader_rejects_a_malformed_table(tmp_path) -> None:
    doc = yaml.safe_load((Path(__file__).parents[1] / "spec/ptx/mma.yaml").read_text())
    doc["instructions"][0]["family"] = "hmma"
    bad = tmp_path / "mma.yaml"
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(MmaSelectError, match=r"instructions\.0\.family"):
        load_table(bad)
    bad.write_text("kind: [unclosed")
    with pytest.raises(MmaSelectError, match="cannot load"):
        load_table(bad)


@pytest.mark.skipif(not TILEIRAS.exists() or not CORPUS.exists(), reason="needs tileiras + corpus")
def test_message_matches_real_tileiras(tmp_path) -> None:
    r = subprocess.run(
        [
            str(TILEIRAS),
            "--gpu-name=sm_80",
            "-o",
            str(tmp_path / "x.cubin"),
            str(CORPUS / "matmul_fp8.tileirbc"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode != 0
    with pytest.raises(MmaSelectError) as e:
        select_mma("f8E4M3FN", "f8E4M3FN", "f32", 80)
    assert f"error: {e.value}" in r.stderr + r.stdout


def test_generated_table_matches_spec():
    """table() reads generated/ptx/mma.py (no YAML at compile time); it must equal what
    load_table() parses and validates from spec/ptx/mma.yaml."""
    assert table() == load_table()
