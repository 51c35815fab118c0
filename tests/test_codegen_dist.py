"""runtime/codegen/dist.py: the closed form of blocked and slice layouts agrees with the layouts'
own ``element_of`` for every thread and register, and ``canonical`` picks exactly one owner."""

from __future__ import annotations

import itertools
import math

import pytest

from tilegen.runtime.codegen.dist import Dist
from tilegen.runtime.codegen.exchange import Form, register_plan, row_major
from tilegen.runtime.layouts.attrs import SliceLayout, default_blocked

SHAPES = [(4, 128), (1,), (2,), (128,), (1024,), (8, 8), (64, 64), (1, 64), (64, 1), (2, 4, 8)]


def _layouts():
    for shape in SHAPES:
        for nw in (1, 4, 8):
            for vec in (1, 4):
                for order in itertools.permutations(range(len(shape))):
                    lay = default_blocked(shape, nw, vec, order)
                    yield lay, shape
                    if len(shape) > 1:
                        for d in range(len(shape)):
                            yield SliceLayout(d, lay), shape[:d] + shape[d + 1 :]


CASES = list(_layouts())


@pytest.mark.parametrize("lay,shape", CASES[::3], ids=lambda x: str(x)[:40])
def test_closed_form_matches_element_of(lay, shape):
    d = Dist(lay, shape)
    assert d.nregs == lay.regs_per_thread(shape)
    owners: dict = {}
    for tid in range(lay.num_threads()):
        for k in range(d.nregs):
            c = d.coord(tid, k)
            assert c == lay.element_of(tid, k, shape)
            if d.canonical(tid, k):
                owners[c] = owners.get(c, 0) + 1
    assert len(owners) == math.prod(shape)
    assert set(owners.values()) == {1}


def test_register_plan_broadcast_is_free_and_transpose_is_not():
    lay = default_blocked((4, 128), 4)
    src = Dist(lay, (4, 1))
    dst = Dist(lay, (4, 128))
    w = row_major((4, 1))
    plan = register_plan([(None, src, w)], dst, Form(0, (1, 0)))
    assert plan is not None and len(plan) == dst.nregs
    # a transpose of a tile spread over lanes along both dims needs other threads' data
    sq = default_blocked((32, 32), 4)
    a = Dist(sq, (32, 32))
    assert register_plan([(None, a, Form(0, (1, 32)))], a, row_major((32, 32))) is None
