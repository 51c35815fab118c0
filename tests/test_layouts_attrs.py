"""Layout attribute math (runtime/layouts): (thread, register) <-> element, exhaustively on small
shapes."""

from itertools import product

import pytest

from tilegen.runtime.layouts import (
    WARP_SIZE,
    BlockedLayout,
    LayoutError,
    SharedLayout,
    SliceLayout,
    default_blocked,
)

BLOCKED = [
    BlockedLayout((1,), (32,), (4,), (0,)),
    BlockedLayout((4,), (32,), (2,), (0,)),
    BlockedLayout((1, 4), (4, 8), (2, 2), (1, 0)),
    BlockedLayout((2, 1), (8, 4), (1, 2), (0, 1)),
    BlockedLayout((1, 1), (1, 32), (4, 1), (1, 0)),
    BlockedLayout((1, 2, 2), (2, 4, 4), (2, 1, 1), (2, 1, 0)),
    BlockedLayout((2, 1, 1), (4, 2, 4), (1, 2, 1), (0, 2, 1)),
]
SHAPES = {
    1: [(1,), (32,), (128,), (512,)],
    2: [(4, 8), (16, 32), (64, 16), (1, 128)],
    3: [(2, 8, 8), (4, 4, 16)],
}


def _all_coords(shape):
    return list(product(*(range(d) for d in shape)))


@pytest.mark.parametrize("layout", BLOCKED, ids=str)
def test_blocked_covers_every_element_and_inverts(layout):
    for shape in SHAPES[layout.rank]:
        regs = layout.regs_per_thread(shape)
        seen = {}
        for tid in range(layout.num_threads()):
            for r in range(regs):
                c = layout.element_of(tid, r, shape)
                assert all(0 <= x < d for x, d in zip(c, shape))
                seen.setdefault(c, []).append((tid, r))
        # every element is owned; owners() is exactly the inverse image
        assert sorted(seen) == _all_coords(shape)
        for c, owners in seen.items():
            assert layout.owners(c, shape) == sorted(owners)
        # no replication when the CTA tile fits in the shape: every element owned exactly once
        if all(c <= d for c, d in zip(layout.cta_tile(), shape)):
            assert all(len(o) == 1 for o in seen.values())
            assert regs * layout.num_threads() == len(seen)
        else:  # replicated: every element owned the same number of times
            assert len({len(o) for o in seen.values()}) == 1


def test_blocked_registers_are_contiguous_along_fastest_dim():
    layout = BlockedLayout((1, 4), (4, 8), (2, 2), (1, 0))
    shape = (16, 64)
    for tid in (0, 5, 37, 127):
        elems = layout.elements_of_thread(tid, shape)
        for k in range(0, len(elems), 4):
            row, col = elems[k]
            assert elems[k : k + 4] == [(row, col + i) for i in range(4)]
            assert col % 4 == 0
    # lane 1 continues where lane 0's vector ends (coalesced)
    assert layout.element_of(1, 0, shape) == (0, 4)


def test_blocked_concrete_mapping():
    layout = BlockedLayout((1,), (32,), (4,), (0,))
    assert layout.regs_per_thread((256,)) == 2
    assert [layout.element_of(5, r, (256,)) for r in range(2)] == [(5,), (133,)]
    assert layout.element_of(33, 0, (256,)) == (33,)
    assert layout.owners((200,), (256,)) == [(72, 1)]


@pytest.mark.parametrize("layout", [b for b in BLOCKED if b.rank >= 2], ids=str)
def test_slice_drops_a_dim_consistently(layout):
    for dim in range(layout.rank):
        s = SliceLayout(dim, layout)
        assert s.rank == layout.rank - 1
        for shape in SHAPES[layout.rank]:
            sshape = shape[:dim] + shape[dim + 1 :]
            seen = set()
            owners: dict = {}  # owners() is pure: asked once per coordinate (replicas share it)
            for tid in range(layout.num_threads()):
                mine = set(s.elements_of_thread(tid, sshape))
                # exactly the projections of the parent elements the thread holds
                proj = {c[:dim] + c[dim + 1 :] for c in layout.elements_of_thread(tid, shape)}
                assert mine == proj
                for r, c in enumerate(s.elements_of_thread(tid, sshape)):
                    if c not in owners:
                        owners[c] = set(s.owners(c, sshape))
                    assert (tid, r) in owners[c]
                seen |= mine
            assert sorted(seen) == _all_coords(sshape)


def test_nested_slice():
    parent = BlockedLayout((1, 2, 2), (2, 4, 4), (2, 1, 1), (2, 1, 0))
    s = SliceLayout(0, SliceLayout(2, parent))
    assert s.rank == 1
    seen = set()
    for tid in range(s.num_threads()):
        seen |= set(s.elements_of_thread(tid, (8,)))
    assert seen == {(i,) for i in range(8)}


@pytest.mark.parametrize(
    "layout",
    [
        SharedLayout(1, 1, 1, (1, 0)),
        SharedLayout(8, 1, 8, (1, 0)),
        SharedLayout(4, 2, 4, (0, 1)),
        SharedLayout(2, 1, 4, (2, 1, 0)),
        SharedLayout(4, 1, 1, (0,)),
    ],
    ids=str,
)
def test_shared_swizzle_is_a_bijection(layout):
    shapes = {1: (64,), 2: (16, 32), 3: (2, 8, 16)}
    shape = shapes[layout.rank]
    offs = {}
    for c in _all_coords(shape):
        o = layout.offset(c, shape)
        assert layout.coord_of(o, shape) == c
        offs[o] = c
    assert sorted(offs) == list(range(len(offs)))


def test_shared_swizzle_permutes_vectors_within_a_row():
    layout = SharedLayout(vec=8, per_phase=1, max_phase=8, order=(1, 0))
    shape = (8, 64)
    # row 3 XORs the 8-element group index with 3; elements of a vector stay together
    assert layout.offset((3, 0), shape) == 3 * 64 + 3 * 8
    assert [layout.offset((3, i), shape) for i in range(8)] == [3 * 64 + 24 + i for i in range(8)]
    # a column of vectors lands in 8 distinct 16-byte groups (bank-conflict free for f16)
    groups = {(layout.offset((r, 0), shape) % 64) // 8 for r in range(8)}
    assert len(groups) == 8


@pytest.mark.parametrize(
    "args, msg",
    [
        (((1,), (16,), (4,), (0,)), "must multiply to 32"),
        (((3,), (32,), (4,), (0,)), "powers of two"),
        (((1, 1), (32,), (4,), (0,)), "has 2 entries"),
        (((1, 1), (4, 8), (1, 1), (0, 0)), "permutation"),
    ],
)
def test_bad_blocked_layouts(args, msg):
    with pytest.raises(LayoutError, match=msg):
        BlockedLayout(*args)


def test_bad_slice_and_ranges():
    b = BlockedLayout((1,), (32,), (4,), (0,))
    with pytest.raises(LayoutError, match="out of range"):
        SliceLayout(1, b)
    with pytest.raises(LayoutError, match="thread id"):
        b.element_of(128, 0, (128,))
    with pytest.raises(LayoutError, match="register index"):
        b.element_of(0, 1, (128,))
    assert b.check_shape((6,)) == "tile dimension 6 is not a power of two"
    assert "rank" in b.check_shape((4, 4))


@pytest.mark.parametrize(
    "shape, warps, vec, order, want",
    [
        ((256,), 4, 1, None, ((1,), (32,), (4,), (0,))),
        ((256,), 4, 4, None, ((4,), (32,), (4,), (0,))),
        ((4, 128), 4, 1, None, ((1, 1), (1, 32), (1, 4), (1, 0))),
        ((64, 64), 8, 8, None, ((1, 8), (4, 8), (8, 1), (1, 0))),
        ((16,), 4, 1, None, ((1,), (32,), (4,), (0,))),  # replicated: tile smaller than CTA
        ((32, 8), 4, 2, (0, 1), ((2, 1), (16, 2), (1, 4), (0, 1))),
    ],
)
def test_default_blocked(shape, warps, vec, order, want):
    layout = default_blocked(shape, warps, vec, order)
    assert (
        layout.size_per_thread,
        layout.threads_per_warp,
        layout.warps_per_cta,
        layout.order,
    ) == want
    assert layout.num_threads() == WARP_SIZE * warps
