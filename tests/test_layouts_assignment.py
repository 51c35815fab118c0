"""The nv_tileas layout assignment pass (runtime/passes/layout_assignment.py) on hand-written
nv_tileaa IR and on corpus kernels lowered by the cuda_tile -> nv_tileaa conversion."""

import pytest

from tilegen.runtime.asm import parse_module, print_module
from tilegen.runtime.diagnostics import DiagnosticEngine
from tilegen.runtime.layouts import BlockedLayout, SliceLayout
from tilegen.runtime.passes.layout_assignment import assign_layouts, unassigned_tiles
from tilegen.runtime.passes.registry import load_passes
from tilegen.runtime.verify.engine import verify_module

SPEC = "attributes {kernel, nv_tileaa.kernel_spec = {num_warps = %d : i32}}"


def _kernel(body: str, args: str, num_warps: int = 4, elem: str = "f32") -> str:
    types = ", ".join(a.split(": ")[1] for a in args.split(", %"))
    return (
        f"nv_tileaa.func @k : ({types}) -> () {SPEC % num_warps} {{\n"
        f"^bb0({args}):\n{body}\n  nv_tileaa.return\n}}\n"
    ).replace("ELEM", elem)


ARGS2D = "%p: !nv_tileaa.ptr<ELEM, 1>, %q: !nv_tileaa.ptr<ELEM, 1>, %m: i32, %n: i32, %s: i32"


def _load2d(ptr_div=16, stride_div=4, cols="128", in_bounds="false, false", tile="4x128"):
    sizes, size_types = ("%m, %n", "i32, i32") if cols == "?" else ("%m", "i32")
    return f"""
  %t0 = nv_tileaa.create_mem_token : !nv_tileaa.mem_token
  %p1 = nv_tileaa.assume #cuda_tile.div_by<{ptr_div}>, %p : !nv_tileaa.ptr<ELEM, 1>
  %s1 = nv_tileaa.assume #cuda_tile.div_by<{stride_div}>, %s : i32
  %mr = nv_tileaa.make_memref %p1 sizes[{sizes}] strides[%s1] : (!nv_tileaa.ptr<ELEM, 1>, {size_types}, i32) -> !nv_tileaa.memref<?x{cols}xELEM, 1, strides=[?,1]>
  %pid = nv_tileaa.get_program_id 0 : i32
  %c4 = "arith.constant"() {{value = 4 : i32}} : () -> i32
  %c0 = "arith.constant"() {{value = 0 : i32}} : () -> i32
  %row = "arith.muli"(%pid, %c4) : (i32, i32) -> i32
  %v, %tok = nv_tileaa.tiled_load %mr[%row, %c0] token %t0 sem weak {{in_bounds = array<i1: {in_bounds}>}} : (!nv_tileaa.memref<?x{cols}xELEM, 1, strides=[?,1]>, i32, i32, !nv_tileaa.mem_token) -> (tile<{tile}xELEM>, !nv_tileaa.mem_token)"""


def _store2d(value="%v", tile="4x128"):
    return f"""
  %q1 = nv_tileaa.assume #cuda_tile.div_by<16>, %q : !nv_tileaa.ptr<ELEM, 1>
  %mq = nv_tileaa.make_memref %q1 sizes[%m] strides[%s1] : (!nv_tileaa.ptr<ELEM, 1>, i32, i32) -> !nv_tileaa.memref<?x128xELEM, 1, strides=[?,1]>
  %st = nv_tileaa.tiled_store %mq[%row, %c0], {value} token %t0 sem weak {{in_bounds = array<i1: false, false>}} : (!nv_tileaa.memref<?x128xELEM, 1, strides=[?,1]>, tile<{tile}xELEM>, i32, i32, !nv_tileaa.mem_token) -> !nv_tileaa.mem_token"""


def _run(text: str, **kw):
    m = parse_module(text, allow_unregistered=True)
    assigners = assign_layouts(m, **kw)
    assert unassigned_tiles(m) == []
    out = print_module(m)
    m2 = parse_module(out, allow_unregistered=True)
    assert print_module(m2) == out  # the laid-out IR round-trips
    de = DiagnosticEngine()
    assert verify_module(m2, de), [d.message for d in de.diagnostics]
    return m, assigners[0], out


def _ops(m):
    return [op for op in m.walk()]


def _by_name(m, name):
    return [op for op in m.walk() if op.name == name]


def test_div_by_facts_give_128_bit_vectors():
    m, a, _ = _run(_kernel(_load2d() + _store2d(), ARGS2D))
    (load,) = _by_name(m, "nv_tileaa.tiled_load")
    layout = load.results[0].type.encoding
    assert layout == BlockedLayout((1, 4), (1, 32), (4, 1), (1, 0))
    assert [x.vec for x in a.accesses] == [4, 4]
    assert a.accesses[1].limits["base alignment"] == 4  # div_by<16> bytes / 4-byte f32
    assert a.accesses[0].limits["stride of dim 0"] == 4
    assert a.converts == 0
    (store,) = _by_name(m, "nv_tileaa.tiled_store")
    assert store.operands[1].type.encoding == layout


@pytest.mark.parametrize(
    "kw, elem, want, reason",
    [
        ({"stride_div": 2}, "f32", 2, "stride of dim 0"),
        ({"ptr_div": 4}, "f32", 1, "base alignment"),
        ({"cols": "?"}, "f32", 1, "extent of dim 1"),  # masked, extent unknown: scalar accesses
        ({"cols": "?", "in_bounds": "false, true"}, "f32", 4, None),  # in bounds: no mask
        ({"stride_div": 16}, "f16", 8, "16 bytes"),
        ({"stride_div": 16, "tile": "4x128"}, "f64", 2, "16 bytes"),
        ({"tile": "64x2"}, "f32", 2, "tile extent"),
    ],
)
def test_vector_width_limits(kw, elem, want, reason):
    tile = kw.get("tile", "4x128")
    text = _kernel(_load2d(**kw), ARGS2D, elem=elem)
    m, a, _ = _run(text)
    (info,) = a.accesses
    assert info.vec == want, info
    if reason:
        assert info.limits[reason] == min(info.limits.values())
    layout = _by_name(m, "nv_tileaa.tiled_load")[0].results[0].type.encoding
    assert layout.size_per_thread[1] == want and layout.order == (1, 0)
    assert layout.num_threads() == 128


def test_narrower_store_keeps_the_value_layout():
    m, a, _ = _run(
        _kernel(_load2d() + _store2d().replace("div_by<16>, %q", "div_by<4>, %q"), ARGS2D)
    )
    assert [x.vec for x in a.accesses] == [4, 1]
    assert _by_name(m, "nv_tileas.convert_layout") == []
    layout = _by_name(m, "nv_tileaa.tiled_load")[0].results[0].type.encoding
    assert _by_name(m, "nv_tileaa.tiled_store")[0].operands[1].type.encoding == layout


def test_wider_store_converts_from_the_load_layout():
    m, a, _ = _run(_kernel(_load2d(ptr_div=4) + _store2d(), ARGS2D))
    assert [x.vec for x in a.accesses] == [1, 4]
    (conv,) = _by_name(m, "nv_tileas.convert_layout")
    assert conv.operands[0].type.encoding.size_per_thread == (1, 1)
    assert conv.results[0].type.encoding.size_per_thread == (1, 4)
    assert _by_name(m, "nv_tileaa.tiled_store")[0].operands[1] is conv.results[0]


def test_conversion_moves_above_broadcast_and_view():
    # a 1-D row vector broadcast against the 2-D tile: convert the 128 source elements (into the
    # slice of the 2-D layout), not the 512 broadcast ones
    args = ARGS2D + ", %w: !nv_tileaa.ptr<ELEM, 1>"
    body = (
        _load2d()
        + """
  %mw = nv_tileaa.make_memref %w sizes[%n] strides[] : (!nv_tileaa.ptr<ELEM, 1>, i32) -> !nv_tileaa.memref<?xELEM, 1, strides=[1]>
  %g, %tg = nv_tileaa.tiled_load %mw[%c0] token %t0 sem weak {in_bounds = array<i1: false>} : (!nv_tileaa.memref<?xELEM, 1, strides=[1]>, i32, !nv_tileaa.mem_token) -> (tile<128xELEM>, !nv_tileaa.mem_token)
  %gv = nv_tileaa.view %g : (tile<128xELEM>) -> tile<1x128xELEM>
  %gb = nv_tileaa.broadcast %gv : (tile<1x128xELEM>) -> tile<4x128xELEM>
  %x = nv_tileaa.mulf %v, %gb rounding<nearest_even> : (tile<4x128xELEM>, tile<4x128xELEM>) -> tile<4x128xELEM>"""
        + _store2d("%x")
    )
    m, a, _ = _run(_kernel(body, args))
    rows = _by_name(m, "nv_tileaa.tiled_load")[0].results[0].type.encoding
    (conv,) = _by_name(m, "nv_tileas.convert_layout")
    assert conv.results[0].type.shape == (128,)
    assert conv.results[0].type.encoding == SliceLayout(0, rows)
    assert _by_name(m, "nv_tileaa.view")[0].operands[0] is conv.results[0]
    assert _by_name(m, "nv_tileaa.broadcast")[0].results[0].type.encoding == rows


def test_broadcast_used_twice_is_copied_not_converted():
    # the broadcast row vector meets the 2-D tile twice: each use gets its own broadcast in the
    # tile's layout (a copy), and only the 128 source elements are converted - never the 512
    # broadcast ones (attention's column indices met QK^T twice: two 128 KB exchanges)
    args = ARGS2D + ", %w: !nv_tileaa.ptr<ELEM, 1>"
    body = (
        _load2d()
        + """
  %mw = nv_tileaa.make_memref %w sizes[%n] strides[] : (!nv_tileaa.ptr<ELEM, 1>, i32) -> !nv_tileaa.memref<?xELEM, 1, strides=[1]>
  %g, %tg = nv_tileaa.tiled_load %mw[%c0] token %t0 sem weak {in_bounds = array<i1: false>} : (!nv_tileaa.memref<?xELEM, 1, strides=[1]>, i32, !nv_tileaa.mem_token) -> (tile<128xELEM>, !nv_tileaa.mem_token)
  %gv = nv_tileaa.view %g : (tile<128xELEM>) -> tile<1x128xELEM>
  %gb = nv_tileaa.broadcast %gv : (tile<1x128xELEM>) -> tile<4x128xELEM>
  %x = nv_tileaa.mulf %v, %gb rounding<nearest_even> : (tile<4x128xELEM>, tile<4x128xELEM>) -> tile<4x128xELEM>
  %x2 = nv_tileaa.addf %x, %gb rounding<nearest_even> : (tile<4x128xELEM>, tile<4x128xELEM>) -> tile<4x128xELEM>"""
        + _store2d("%x2")
    )
    m, a, _ = _run(_kernel(body, args))
    rows = _by_name(m, "nv_tileaa.tiled_load")[0].results[0].type.encoding
    convs = _by_name(m, "nv_tileas.convert_layout")
    assert convs and all(c.results[0].type.shape in ((128,), (1, 128)) for c in convs)
    for name in ("nv_tileaa.mulf", "nv_tileaa.addf"):
        (op,) = _by_name(m, name)
        assert all(v.type.encoding == rows for v in op.operands)
        assert op.operands[1].op.name == "nv_tileaa.broadcast"


def test_softmax_shape_reduce_slice_view_broadcast():
    body = (
        _load2d(in_bounds="false, false")
        + """
  %r = nv_tileaa.reduce %v {axis = 1 : i32} : (tile<4x128xf32>) -> tile<4xf32> {
  ^bb0(%x: f32, %y: f32):
    %z = nv_tileaa.addf %x, %y rounding<nearest_even> : (f32, f32) -> f32
    nv_tileaa.yield %z : f32
  }
  %rv = nv_tileaa.view %r : (tile<4xf32>) -> tile<4x1xf32>
  %rb = nv_tileaa.broadcast %rv : (tile<4x1xf32>) -> tile<4x128xf32>
  %d = nv_tileaa.subf %v, %rb rounding<nearest_even> : (tile<4x128xf32>, tile<4x128xf32>) -> tile<4x128xf32>
  %e = "math.exp"(%d) : (!cuda_tile.tile<4x128xf32>) -> !cuda_tile.tile<4x128xf32>"""
        + _store2d("%e")
    )
    m, a, out = _run(_kernel(body, ARGS2D))
    blocked = _by_name(m, "nv_tileaa.tiled_load")[0].results[0].type.encoding
    (red,) = _by_name(m, "nv_tileaa.reduce")
    assert red.results[0].type.encoding == SliceLayout(1, blocked)
    assert _by_name(m, "nv_tileaa.view")[0].results[0].type.encoding == blocked
    assert _by_name(m, "nv_tileaa.broadcast")[0].results[0].type.encoding == blocked
    assert _by_name(m, "math.exp")[0].results[0].type.encoding == blocked
    assert a.converts == 0 and "convert_layout" not in out


def test_transpose_inserts_one_convert_layout_before_the_store():
    body = (
        _load2d(tile="32x32", cols="32")
        + """
  %tr = nv_tileaa.permute %v [1, 0] : (tile<32x32xf32>) -> tile<32x32xf32>"""
        + _store2d("%tr", tile="32x32").replace("?x128x", "?x32x")
    )
    m, a, _ = _run(_kernel(body, ARGS2D))
    src = _by_name(m, "nv_tileaa.tiled_load")[0].results[0].type.encoding
    perm = _by_name(m, "nv_tileaa.permute")[0].results[0].type.encoding
    # the permuted layout owns the transposed elements of the source layout
    for tid in (0, 7, 100):
        got = perm.elements_of_thread(tid, (32, 32))
        assert got == [(c, r) for r, c in src.elements_of_thread(tid, (32, 32))]
    (conv,) = _by_name(m, "nv_tileas.convert_layout")
    (store,) = _by_name(m, "nv_tileaa.tiled_store")
    assert store.operands[1] is conv.results[0]
    assert conv.operands[0].type.encoding == perm
    assert conv.results[0].type.encoding == store_anchor(a)
    assert a.converts == 1


def store_anchor(a):
    info = [x for x in a.accesses if x.op.name == "nv_tileaa.tiled_store"][0]
    return info.op.operands[1].type.encoding


def test_splat_other_takes_the_load_layout_and_num_warps_from_kernel_spec():
    body = (
        _load2d()
        .replace("ELEM", "f32")
        .replace(
            "%v, %tok = nv_tileaa.tiled_load %mr[%row, %c0] token",
            "%v, %tok = nv_tileaa.tiled_load %mr[%row, %c0] other %ninf token",
        )
        .replace(
            "(!nv_tileaa.memref<?x128xf32, 1, strides=[?,1]>, i32, i32, !nv_tileaa.mem_token)",
            "(!nv_tileaa.memref<?x128xf32, 1, strides=[?,1]>, i32, i32, tile<4x128xf32>, !nv_tileaa.mem_token)",
        )
    )
    body = """
  %cinf = "arith.constant"() {value = 0xFF800000 : f32} : () -> f32
  %ninf = nv_tileaa.splat %cinf : (f32) -> tile<4x128xf32>""" + body.replace("ELEM", "f32")
    m, a, _ = _run(_kernel(body, ARGS2D, num_warps=8))
    (load,) = _by_name(m, "nv_tileaa.tiled_load")
    (splat,) = _by_name(m, "nv_tileaa.splat")
    assert splat.results[0].type.encoding == load.results[0].type.encoding
    assert load.results[0].type.encoding.num_warps == 8
    # the pass option overrides the kernel spec
    m, a, _ = _run(_kernel(body, ARGS2D, num_warps=8), num_warps=2)
    assert _by_name(m, "nv_tileaa.splat")[0].results[0].type.encoding.num_warps == 2


def test_pass_is_registered_with_options():
    info = load_passes()["nv-tileas-assign-layouts"]
    opts = info.parse_options({"num-warps": "8", "wgmma": "false", "num-stages": "3"})
    assert opts == {
        "num-warps": 8,
        "wgmma": False,
        "cp-async": None,  # unset: on (runtime/passes/layout_assignment.LayoutOptions)
        "pipeline": None,
        "num-stages": 3,
        "tcgen05": None,  # unset: on (sm_100 dots that fit tcgen05)
    }
    with pytest.raises(ValueError, match="bad value"):
        info.parse_options({"num-warps": "eight"})
    with pytest.raises(ValueError, match="bad value"):
        info.parse_options({"cp-async": "maybe"})


# ----------------------------------------------------------------------------- corpus

from paths import CORPUS_OUT as CORPUS  # ../shared or $TILEGEN_SHARED


def _lower(name: str):
    from tilegen.runtime.asm import parse_module as pm
    from tilegen.runtime.driver import compile_module, options_for

    module = pm((CORPUS / f"{name}.mlir").read_text())
    return compile_module(module, options_for("sm_90", opt_level=0), "convert").module


needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="corpus not available")


@needs_corpus
@pytest.mark.parametrize(
    "name, widths, converts",
    [
        # tileiras: ld/st.global.b32 (dynamic extents, no div_by on them: masked scalar accesses)
        ("vec_add", [1, 1, 1], 0),
        ("softmax", [1, 1], 0),
        # tileiras loads layernorm's rows by TMA; the f16 row load here is 16-byte vectors
        ("layernorm", [8, 1, 1, 1], 2),
        ("transpose2d", [1, 1], 1),
        # loops and ifs carry layouts through iter args and yields
        ("reduce_cols_loop", None, None),
        ("for_loops", None, None),
        ("control_if", None, None),
        ("flash_attention", None, None),
        ("gather_scatter", None, None),
    ],
)
def test_corpus_kernels_get_full_layouts(name, widths, converts):
    root = _lower(name)
    (a,) = assign_layouts(root)
    assert unassigned_tiles(root) == []
    if widths is not None:
        assert [x.vec for x in a.accesses] == widths
        assert a.converts == converts
    for op in root.walk():  # every laid-out type is one its layout can describe
        for v in op.results:
            enc = getattr(v.type, "encoding", None)
            if enc is not None:
                assert enc.check_shape(v.type.shape) is None, (op.name, v.type)
    for loop in [op for op in root.walk() if op.name == "scf.for"]:
        n = len(loop.results)
        body = loop.regions[0].blocks[0]
        for k in range(n):
            init = loop.operands[len(loop.operands) - n + k]
            assert body.args[k + 1].type == init.type == loop.results[k].type
            assert body.terminator.operands[k].type == init.type
    assert a.num_warps == 4
    out = print_module(root)
    de = DiagnosticEngine()
    assert verify_module(parse_module(out, allow_unregistered=True), de), [
        d.message for d in de.diagnostics
    ]


def test_pending_chain_takes_the_store_layout():
    body = (
        _load2d()
        + """
  %c1 = "arith.constant"() {value = 1.0 : f32} : () -> f32
  %a1 = nv_tileaa.splat %c1 : (f32) -> tile<4x128xf32>
  %a2 = nv_tileaa.splat %c1 : (f32) -> tile<4x128xf32>
  %sum = nv_tileaa.addf %a1, %a2 rounding<nearest_even> : (tile<4x128xf32>, tile<4x128xf32>) -> tile<4x128xf32>"""
        + _store2d("%sum")
    )
    m, a, _ = _run(_kernel(body, ARGS2D))
    anchor = store_anchor(a)
    assert anchor.size_per_thread == (1, 4)
    for op in _by_name(m, "nv_tileaa.splat") + _by_name(m, "nv_tileaa.addf"):
        assert op.results[0].type.encoding == anchor
    assert a.converts == 0


def test_unit_dims_view_keeps_the_registers():
    from tilegen.runtime.passes.layout_assignment import unit_dims_view

    load = BlockedLayout((1, 1, 1, 8), (1, 1, 2, 16), (1, 1, 4, 1), (3, 2, 1, 0))
    got = unit_dims_view(load, (1, 1, 64, 128), (64, 128))
    assert got == BlockedLayout((1, 8), (2, 16), (4, 1), (1, 0))
    for tid in (0, 37, 127):  # every thread holds the same elements in the same registers
        for reg in range(got.regs_per_thread((64, 128))):
            assert load.element_of(tid, reg, (1, 1, 64, 128))[2:] == got.element_of(
                tid, reg, (64, 128)
            )
    back = unit_dims_view(got, (64, 128), (1, 64, 1, 128))
    assert back.size_per_thread == (1, 1, 1, 8) and back.warps_per_cta == (1, 4, 1, 1)
    assert back.order[:2] == (3, 1)
    # a unit dim holding threads (copies) or the non-unit dims changing: no such view
    spread = BlockedLayout((1, 8), (2, 16), (4, 1), (1, 0))
    assert unit_dims_view(spread, (1, 128), (128,)) is None
    assert unit_dims_view(got, (64, 128), (128, 64)) is None


def test_view_dropping_unit_dims_needs_no_conversion():
    # cuTile loads a 4-d (batch, head, rows, cols) box and views it as the 2-d tile a dot or a
    # store takes: the view keeps the load's registers (it was laid out anew: a 16 KB exchange)
    args = "%p: !nv_tileaa.ptr<ELEM, 1>, %q: !nv_tileaa.ptr<ELEM, 1>, %m: i32, %n: i32, %s: i32"
    body = """
  %t0 = nv_tileaa.create_mem_token : !nv_tileaa.mem_token
  %p1 = nv_tileaa.assume #cuda_tile.div_by<16>, %p : !nv_tileaa.ptr<ELEM, 1>
  %s1 = nv_tileaa.assume #cuda_tile.div_by<16>, %s : i32
  %mr = nv_tileaa.make_memref %p1 sizes[%n, %m] strides[%s1, %s1] : (!nv_tileaa.ptr<ELEM, 1>, i32, i32, i32, i32) -> !nv_tileaa.memref<?x?x128xELEM, 1, strides=[?,?,1]>
  %c0 = "arith.constant"() {value = 0 : i32} : () -> i32
  %v, %tok = nv_tileaa.tiled_load %mr[%c0, %c0, %c0] token %t0 sem weak {in_bounds = array<i1: false, false, false>} : (!nv_tileaa.memref<?x?x128xELEM, 1, strides=[?,?,1]>, i32, i32, i32, !nv_tileaa.mem_token) -> (tile<1x16x128xELEM>, !nv_tileaa.mem_token)
  %w = nv_tileaa.view %v : (tile<1x16x128xELEM>) -> tile<16x128xELEM>
  %q1 = nv_tileaa.assume #cuda_tile.div_by<16>, %q : !nv_tileaa.ptr<ELEM, 1>
  %mq = nv_tileaa.make_memref %q1 sizes[%m] strides[%s1] : (!nv_tileaa.ptr<ELEM, 1>, i32, i32) -> !nv_tileaa.memref<?x128xELEM, 1, strides=[?,1]>
  %st = nv_tileaa.tiled_store %mq[%c0, %c0], %w token %t0 sem weak {in_bounds = array<i1: false, false>} : (!nv_tileaa.memref<?x128xELEM, 1, strides=[?,1]>, tile<16x128xELEM>, i32, i32, !nv_tileaa.mem_token) -> !nv_tileaa.mem_token"""
    m, _, _ = _run(_kernel(body, args, elem="f16"))
    assert _by_name(m, "nv_tileas.convert_layout") == []
    (view,) = _by_name(m, "nv_tileaa.view")
    src, out = view.operands[0].type.encoding, view.results[0].type.encoding
    assert src.size_per_thread == (1, 1, 8)
    assert out == BlockedLayout(
        src.size_per_thread[1:], src.threads_per_warp[1:], src.warps_per_cta[1:], (1, 0)
    )
