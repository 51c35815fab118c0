"""``nv-tileaa-split-pair-rows``: a ``num_ctas=2`` kernel's rows divided between the CTAs of
its cluster (docs/pipelines.md section 40).

A kernel declared with ``num_ctas=2`` asks for each tile block to run on a cluster of two CTAs.
tileiras 13.5 divides the block's rows between them wherever it does not pair the MMAs
themselves (sm_100's ``cta_group::2``): on sm_90 an attention's (K and V multicast to both), on
sm_120 every kernel's (a 128 x 128 GEMM: two CTAs of 64 rows, half the HMMAs and TMA stores
each). tilegen ignored the hint there. A 256-row attention on sm_90a ran on one CTA of three
warp groups at 168 registers a thread and spilled (fuzzer seed 260005: 480 bytes); a 256-row
sm_120 GEMM under ``occupancy=2`` could not keep the hint's 128 registers (seed 170108).

Here every value that carries the dots' M dimension (the rows) keeps half of it, and CTA ``r``
of the pair computes rows ``r M / 2 ..`` of the block. The kernel is data-parallel along the
rows, so each CTA runs the same program on its half:

* **Which values.** The dots' A, C and result along dim 0, and from them every value linked
  along that axis through elementwise ops, broadcasts, views, permutes, reductions and scans
  along another axis, a tiled load's result, padding and mask, a tiled store's value, and a
  loop's or an ``if``'s carried values (:func:`row_axes`).
* **What changes.** Those values keep half of that dim. A ``tiled_load`` / ``tiled_store`` on
  it reads and writes at its index plus ``r M / 2``; a ``make_range`` along it counts from
  there; splats and splat constants take the half shape. ``r`` is
  ``nv_tileas.cluster_cta_rank``. Nothing else moves: loop bounds, the other operands (K and
  V, or B: on sm_90's async path the two CTAs copy half of each by TMA multicast into both,
  ``codegen/async_loop._multicast``; on sm_120 each CTA loads them whole), the grid
  (``.blocksareclusters``: the grid counts clusters, so ``get_program_id`` is the cluster's id
  and cuTile's grid is unchanged).
* **Refused** (the kernel is left as it is): a reduction, scan or dot across the rows, an op
  this analysis does not know on a row value, the same value reached on two axes, block scale
  factors, atomics or prints anywhere in the kernel (both CTAs would run them).

The kernel gets ``nv_tileas.pair_rows`` (the rows of each CTA), its launch a cluster of two
(codegen/emit.py), and its ``num_cta_in_cga`` hint becomes 1 so that no later rule pairs its
halves again. The interpreter runs both CTAs of each tile block.

Where (:data:`TARGETS`), with the ``cta-pair`` option on, for a kernel whose dots all have
the same M:

* hinted ``num_cta_in_cga = 2``: on sm_90, 256 rows and a loop of two dots or more (the
  attention form; a GEMM's one dot is the async path's pair, section 19; a 128-row attention
  stays whole on two consumer warp groups, where its halves would run on one each: left to a
  hardware comparison); on sm_120, 128 or 256 rows, GEMMs too;
* without the hint, an attention of 256 rows on sm_90 and sm_120, and a 256 x 256 GEMM on
  sm_120 (:data:`UNHINTED_GEMMS`): one CTA spills there.

sm_100 keeps its 256-row attention on one CTA, its accumulators in tensor memory (section 25).
A GEMM goes the other way (:func:`pair_gemm`): an sm_90 256 x 256 f32 tile, which no CTA
holds, gets the hint and so the async path's pair.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import DenseElementsAttr, DictAttr, IntegerAttr
from tilegen.runtime.ir import BlockArgument, Operation, OpResult, Value
from tilegen.runtime.layouts.kernel import CLUSTER_RANK_OP as RANK_OP
from tilegen.runtime.layouts.kernel import PAIR_ROWS_ATTR
from tilegen.runtime.passes.registry import parse_bool, register
from tilegen.runtime.rewrite.rewriter import PatternRewriter
from tilegen.runtime.types import I32, TileType, element_name

#: target -> the tile block's row counts the pair divides there (each CTA: half), whether a
#: GEMM's one dot qualifies too (sm_90's GEMMs run on the async path's pair, section 19), and
#: the row counts of an attention divided without the hint (256: one CTA spills)
TARGETS = {90: ((256,), False, (256,)), 120: ((128, 256), True, (256,))}

#: ops whose every tile operand and result are the same elements, position by position
_IDENTITY = ("nv_tileaa.assume",)
#: ops anywhere in the kernel that make it refuse (both CTAs of the pair would run them)
_EFFECTS = ("atomic", "print", "scatter", "histogram")


class Refused(Exception):
    """The kernel is not row-parallel as this pass understands it (the message says why)."""


def _tile(v: Value) -> bool:
    return isinstance(v.type, TileType)


def _reshaped_axis(src: tuple, dst: tuple, d: int) -> Optional[int]:
    """The dim of ``dst`` that holds ``src``'s dim ``d`` whole under a row-major reshape."""
    before = 1
    for x in src[:d]:
        before *= x
    acc = 1
    for i, x in enumerate(dst):
        if acc == before and x == src[d]:
            return i
        acc *= x
    return None


class _Axes:
    """The row axis of every value linked to the dots' rows (module docstring)."""

    def __init__(self) -> None:
        self.axis: dict = {}
        self.work: list = []

    def put(self, v: Value, d: int) -> None:
        if not _tile(v):
            raise Refused(f"a row value that is not a tile ({v.type})")
        have = self.axis.get(v)
        if have is None:
            self.axis[v] = d
            self.work.append(v)
        elif have != d:
            raise Refused("a value holds the rows on two axes")

    def no_rows(self, v: Value) -> None:
        if v in self.axis:
            raise Refused("a value the rows reach is used across them")

    def run(self) -> None:
        while self.work:
            v = self.work.pop()
            ops = [u for u, _ in v.uses]
            if isinstance(v, OpResult):
                ops.append(v.op)
            else:  # a block argument: its loop
                ops.append(v.block.parent_op)
            for op in ops:
                self.visit(op)

    # ------------------------------------------------------------------ the rules
    def visit(self, op: Operation) -> None:
        name = op.name
        if name in ("scf.yield", "nv_tileaa.yield"):
            parent = op.parent.parent_op if op.parent is not None else None
            if parent is not None and parent.name in ("scf.for", "scf.if"):
                self.visit(parent)
            return
        if name == "scf.for":
            return self._loop(op)
        if name == "scf.if":
            return self._if(op)
        known = {v: self.axis[v] for v in (*op.operands, *op.results) if v in self.axis}
        if not known:
            return
        if name == "nv_tileaa.dot":
            return self._dot(op)
        if name in ("nv_tileaa.splat", "nv_tileaa.make_range", "arith.constant"):
            return  # (rewritten by shape)
        if name == "nv_tileaa.broadcast":
            return self._broadcast(op)
        if name == "nv_tileaa.view":
            return self._view(op)
        if name == "nv_tileaa.permute":
            return self._permute(op)
        if name in ("nv_tileaa.reduce", "nv_tileaa.scan"):
            return self._reduce(op, name.endswith("reduce"))
        if name in ("nv_tileaa.tiled_load", "nv_tileaa.tiled_store"):
            return self._tiled(op)
        if name in _IDENTITY or (op.opdef is not None and op.opdef.has_trait("Elementwise")):
            return self._same(op)
        raise Refused(f"'{name}' on a row value")

    def _same(self, op: Operation) -> None:
        tiles = [v for v in (*op.operands, *op.results) if _tile(v)]
        shape = tiles[0].type.shape
        if any(v.type.shape != shape for v in tiles):
            raise Refused(f"'{op.name}' of tiles of several shapes")
        d = next(self.axis[v] for v in tiles if v in self.axis)
        for v in tiles:
            self.put(v, d)

    def _loop(self, op: Operation) -> None:
        body = op.regions[0].blocks[0]
        inits = op.operands[3:]
        yielded = body.ops[-1].operands
        for j, res in enumerate(op.results):
            self._carried([inits[j], body.args[1 + j], yielded[j], res])

    def _if(self, op: Operation) -> None:
        for j, res in enumerate(op.results):
            group = [res] + [r.blocks[0].ops[-1].operands[j] for r in op.regions if r.blocks]
            self._carried(group)

    def _carried(self, group: list) -> None:
        d = next((self.axis[v] for v in group if v in self.axis), None)
        if d is not None:
            for v in group:
                self.put(v, d)

    def _dot(self, op: Operation) -> None:
        a, b, c = op.operands[:3]
        if len(op.operands) > 3:
            raise Refused("a dot with block scale factors")
        for v in (a, c, op.results[0]):
            if self.axis.get(v, 0) != 0:
                raise Refused("a dot's rows are not its M dimension")
            self.put(v, 0)
        self.no_rows(b)

    def _broadcast(self, op: Operation) -> None:
        src, res = op.operands[0], op.results[0]
        if src in self.axis:
            self.put(res, self.axis[src])
        d = self.axis.get(res)
        if d is not None and src.type.shape[d] == res.type.shape[d]:
            self.put(src, d)

    def _view(self, op: Operation) -> None:
        src, res = op.operands[0], op.results[0]
        s, r = tuple(src.type.shape), tuple(res.type.shape)
        if src in self.axis:
            d = _reshaped_axis(s, r, self.axis[src])
            if d is None:
                raise Refused("a view that splits or merges the rows")
            self.put(res, d)
        if res in self.axis:
            d = _reshaped_axis(r, s, self.axis[res])
            if d is None:
                raise Refused("a view that splits or merges the rows")
            self.put(src, d)

    def _permute(self, op: Operation) -> None:
        src, res = op.operands[0], op.results[0]
        perm = list(op.attributes["permutation"].values)
        if src in self.axis:
            self.put(res, perm.index(self.axis[src]))
        if res in self.axis:
            self.put(src, perm[self.axis[res]])

    def _reduce(self, op: Operation, drops: bool) -> None:
        ax = op.attributes["axis"].value
        ins = [v for v in op.operands if _tile(v)]
        d = next((self.axis[v] for v in ins if v in self.axis), None)
        if d is None:  # from a result
            r = next(self.axis[v] for v in op.results if v in self.axis)
            d = r + 1 if drops and r >= ax else r
        if d == ax:
            raise Refused(f"'{op.name}' along the rows")
        for v in ins:
            self.put(v, d)
        for v in op.results:
            self.put(v, d - 1 if drops and d > ax else d)

    def _tiled(self, op: Operation) -> None:
        """A tiled access's tiles (result, value, padding, mask) hold its elements at the
        same positions."""
        od = op.opdef
        names = _groups(op)
        tiles = [op.results[0]] if op.name.endswith("tiled_load") else []
        for group in ("value", "other", "mask"):
            if group in names:
                tiles += [x for x in od.operand_group(op, group) if _tile(x)]
        d = next((self.axis[x] for x in tiles if x in self.axis), None)
        if d is not None:
            for x in tiles:
                self.put(x, d)


def _groups(op: Operation) -> set:
    return {d.name for d in op.opdef.operands}


def row_axes(func: Operation, rows: int) -> dict:
    """Value -> its row axis, for every value linked to the kernel's dots' rows; raises
    :class:`Refused` where the kernel is not row-parallel."""
    ax = _Axes()
    for op in func.walk():
        if any(k in op.name for k in _EFFECTS):
            raise Refused(f"'{op.name}' would run on both CTAs")
        if op.name == "nv_tileaa.dot":
            ax.put(op.results[0], 0)
    ax.run()
    for v, d in ax.axis.items():
        if v.type.shape[d] != rows:
            raise Refused(f"a row value of {v.type.shape[d]} rows, not {rows}")
        if isinstance(v, BlockArgument) and v.block.parent_op is func:
            raise Refused("a kernel argument along the rows")
        op = v.op if isinstance(v, OpResult) else None
        if op is not None and op.name == "arith.constant":
            attr = op.attributes["value"]
            if not isinstance(attr, DenseElementsAttr) or not attr.is_splat:
                raise Refused("a tile constant along the rows that is not a splat")
        if op is not None and op.name == "nv_tileaa.make_range":
            length = op.attributes["end"].value - op.attributes["start"].value
            if length != rows or v.type.element != I32:
                raise Refused("a row range that is not the block's, of i32")
    return ax.axis


def candidate(func: Operation, sm: int) -> int:
    """The tile block's rows where the pass considers the kernel (module docstring, "Where"),
    else 0."""
    from tilegen.runtime.layouts.kernel import kernel_spec_int

    if sm not in TARGETS or PAIR_ROWS_ATTR in func.attributes:
        return 0
    sizes, gemms, unhinted = TARGETS[sm]
    hint = kernel_spec_int(func, "num_cta_in_cga")
    if hint != 2:
        if hint not in (None, 1):
            return 0
        sizes = unhinted
    dots = [o for o in func.walk() if o.name == "nv_tileaa.dot"]
    if not dots or any(len(o.results[0].type.shape) != 2 for o in dots):
        return 0
    rows = {o.results[0].type.shape[0] for o in dots}
    if len(rows) != 1 or next(iter(rows)) not in sizes:
        return 0
    loops = [o for o in func.walk() if o.name == "scf.for"]
    most = max(
        (sum(1 for o in lp.regions[0].blocks[0].ops if o.name == "nv_tileaa.dot") for lp in loops),
        default=0,
    )
    if hint != 2 and most < 2 and not _unpaired_gemm(dots, sm):  # (unhinted: attention,
        return 0  # or a GEMM tile no CTA holds)
    return next(iter(rows)) if most >= (1 if gemms else 2) else 0


#: target -> the (M, N) of GEMM tiles divided without the hint: f32 / i32 accumulators of
#: 256 registers a thread on 8 warps, which spilled on one CTA (sm_90's go to the async pair,
#: :func:`pair_gemm`)
UNHINTED_GEMMS = {120: ((256, 256),)}


def _unpaired_gemm(dots: list, sm: int) -> bool:
    """One dot whose tile and accumulator :data:`UNHINTED_GEMMS` lists for ``sm``."""
    if len(dots) != 1:
        return False
    t = dots[0].results[0].type
    return tuple(t.shape) in UNHINTED_GEMMS.get(sm, ()) and element_name(t.element) in (
        "f32",
        "i32",
    )


def split(func: Operation, axes: dict, rows: int) -> None:
    """Rewrite ``func`` so each CTA of the pair computes its half of the ``rows``."""
    half = rows // 2
    rw = PatternRewriter()
    body = func.regions[0].blocks[0]
    loc = func.loc
    rw.set_insertion_point_to_start(body)
    rank = rw.create(RANK_OP, [], [I32], {}, loc).results[0]
    size = rw.create("arith.constant", [], [I32], {"value": IntegerAttr(half, I32)}, loc)
    first = rw.create("arith.muli", [rank, size.results[0]], [I32], {}, loc).results[0]
    offsets: dict = {}

    def offset(t):
        """``128 r`` in type ``t`` (an index's type), made once at the kernel's start."""
        if t == I32:
            return first
        if t not in offsets:
            rw.set_insertion_point_after(first.op)
            offsets[t] = rw.create("arith.index_cast", [first], [t], {}, loc).results[0]
        return offsets[t]

    for op in list(func.walk()):
        if op.name == "nv_tileaa.make_range" and op.results[0] in axes:
            _shift_range(rw, op, first, half)
        elif op.name in ("nv_tileaa.tiled_load", "nv_tileaa.tiled_store"):
            v = op.results[0] if op.name.endswith("load") else _value(op)
            if v in axes:
                idx = _index_position(op) + axes[v]
                i = op.operands[idx]
                rw.set_insertion_point(op)
                moved = rw.create("arith.addi", [i, offset(i.type)], [i.type], {}, op.loc)
                op.set_operand(idx, moved.results[0])
    for v, d in axes.items():
        t = v.type
        shape = list(t.shape)
        shape[d] = half
        v.type = TileType(tuple(shape), t.element, t.encoding)
        op = v.op if isinstance(v, OpResult) else None
        if op is not None and op.name == "arith.constant":
            attr = op.attributes["value"]
            op.set_attr("value", DenseElementsAttr(v.type, attr.values, attr.bits))
    func.set_attr(PAIR_ROWS_ATTR, IntegerAttr(half, I32))
    spec = func.attributes.get("nv_tileaa.kernel_spec")
    if isinstance(spec, DictAttr):
        items = tuple(
            (k, IntegerAttr(1, v.type) if k == "num_cta_in_cga" else v) for k, v in spec.items
        )
        func.set_attr("nv_tileaa.kernel_spec", DictAttr(items))


def _value(op: Operation) -> Value:
    return op.opdef.operand_group(op, "value")[0]


def _index_position(op: Operation) -> int:
    """The operand position of a tiled access's first index."""
    od = op.opdef
    at = 0
    for d, (first, n) in zip(od.operands, od.operand_segments(op)):
        if d.name == "indices":
            return first
        at = first + n
    return at


def _shift_range(rw: PatternRewriter, op: Operation, first: Value, half: int) -> None:
    """``make_range 0 to 256`` along the rows: ``128 r + [0, 128)``."""
    start = op.attributes["start"].value
    res = op.results[0]
    t = TileType((half,), res.type.element, res.type.encoding)
    op.set_attr("end", IntegerAttr(start + half, op.attributes["end"].type))
    rw.set_insertion_point_after(op)
    splat = rw.create("nv_tileaa.splat", [first], [t], {}, op.loc).results[0]
    moved = rw.create("arith.addi", [res, splat], [t], {}, op.loc)
    for user, i in list(res.uses):
        if user is not moved:
            user.set_operand(i, moved.results[0])


#: sm_90: the (M, N) of a GEMM tile whose f32 / i32 accumulators no CTA holds (256 registers a
#: thread on two consumer warp groups, the whole register file): paired without the hint
PAIRED_TILES = {90: ((256, 256),)}


def pair_gemm(func: Operation, sm: int) -> bool:
    """Give a GEMM whose accumulator tile no CTA can hold the ``num_cta_in_cga = 2`` hint, so
    that it runs on the async path's CTA pair (sections 19 and 30: 128 rows a CTA, B multicast)
    as if its author had asked: on one sm_90 CTA a 256 x 256 f32 tile spills 1.8-2.8 KB, as
    tileiras's does (fuzzer seeds 300138, 300108). Only where the pair's structural conditions
    hold (``layouts.kernel._pair_form``); whether it applies."""
    from tilegen.runtime.layouts.kernel import _pair_form, kernel_spec_int

    if kernel_spec_int(func, "num_cta_in_cga") not in (None, 1):
        return False
    body = func.regions[0].blocks[0]
    loops = [o for o in body.ops if o.name == "scf.for"]
    if len(loops) != 1:
        return False
    dots = [o for o in loops[0].regions[0].blocks[0].ops if o.name == "nv_tileaa.dot"]
    if len(dots) != 1 or len(dots[0].results[0].type.shape) != 2:
        return False
    if tuple(dots[0].results[0].type.shape) not in PAIRED_TILES.get(sm, ()):
        return False
    if element_name(dots[0].results[0].type.element) not in ("f32", "i32"):
        return False
    spec = func.attributes.get("nv_tileaa.kernel_spec")
    if not isinstance(spec, DictAttr) or not _pair_form(func, loops[0], dots[0], sm):
        return False
    items = [(k, v) for k, v in spec.items if k != "num_cta_in_cga"]
    items.append(("num_cta_in_cga", IntegerAttr(2, I32)))
    func.set_attr("nv_tileaa.kernel_spec", DictAttr(tuple(sorted(items))))
    return True


def split_kernel(func: Operation, sm: int) -> Optional[str]:
    """Split ``func`` where it qualifies: None when it did, else why not ("" where the kernel
    is no candidate)."""
    rows = candidate(func, sm)
    if not rows:
        return ""
    try:
        axes = row_axes(func, rows)
    except Refused as e:
        return str(e)
    split(func, axes, rows)
    return None


@register(
    "nv-tileaa-split-pair-rows",
    options={"compute-capability": (int, 0), "cta-pair": (parse_bool, True)},
    summary="divide a num_ctas=2 kernel's rows between the two CTAs of its cluster",
)
def _pass(root: Operation, options: dict) -> None:
    from tilegen.runtime.passes.k_loop_pipelining import kernel_functions

    sm = options.get("compute-capability", 0)
    if not options.get("cta-pair", True):
        return
    for func in kernel_functions(root):
        if func.regions and func.regions[0].blocks and not pair_gemm(func, sm):
            split_kernel(func, sm)
