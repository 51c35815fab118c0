"""``nv-tileaa-split-select-conditions`` (runtime/passes/split_select.py; docs/pipelines.md
section 28): ``select(a & b, x, y)`` on tiles becomes ``select(a, select(b, x, y), y)``, each
comparison computed next to the select that reads it. Attention with a boundary mask and a
causal mask together spilled 280 bytes at the 224 registers of sm_100's one-warp-group form
(occupancy 2); nested, it spills none, and the results are the same."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tilegen.runtime.ptxas import find_ptxas


def _attention(tmp_path):
    pytest.importorskip("cuda.tile", reason="cuda-tile is not installed")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import fuzz_async as fa

    # a ragged sequence (240): the boundary mask and the causal mask are both live
    cfg = fa.Config(
        0,
        "attention",
        "sm_100a",
        dict(e="f16", TM=128, TN=128, D=64, CAUSAL=1),
        {"occupancy": 2},
        dict(S=240, T=240, H=1),
    )
    return fa, cfg


def test_the_pass_nests_the_selects_next_to_their_comparisons(tmp_path):
    import numpy as np

    from tilegen.runtime import driver
    from tilegen.runtime.asm import print_module
    from tilegen.runtime.options import CompileOptions

    fa, cfg = _attention(tmp_path)
    path = tmp_path / "a.tileirbc"
    fa.export(cfg, str(path), fa.problem(cfg, np.random.default_rng(0))[0])
    before = driver.compile_source(path, CompileOptions(target="sm_100a"), until="convert")
    assert "arith.andi" in print_module(before.module)  # the kernel's keep = a & b
    c = driver.compile_source(path, CompileOptions(target="sm_100a"), until="layouts")
    loop = print_module(c.module).split("scf.for", 1)[1]
    lines = [ln.strip() for ln in loop.splitlines()]
    assert not any("arith.andi" in ln for ln in lines)
    selects = [i for i, ln in enumerate(lines) if "arith.select" in ln]
    assert len(selects) == 2
    for i in selects:  # its condition computed right before it (a broadcast may come between)
        cond = re.search(r"arith\.select (%\S+),", lines[i]).group(1)
        defs = [j for j, ln in enumerate(lines) if ln.startswith(cond + " ")]
        assert defs and i - defs[0] <= 2, (lines[defs[0]] if defs else cond, lines[i])
    outer, inner = max(selects), min(selects)
    inner_res = lines[inner].split(" = ")[0]
    assert re.search(rf"arith\.select %\S+, {re.escape(inner_res)}, ", lines[outer])


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_attention_with_two_masks_at_occupancy_two_does_not_spill(tmp_path):
    fa, cfg = _attention(tmp_path)
    o = fa.check(cfg, str(tmp_path))
    assert o.status == "ok", f"{o.status}: {o.detail}"  # 0 spills, matches NumPy (strict)
    assert "4 consumer" in o.plan
