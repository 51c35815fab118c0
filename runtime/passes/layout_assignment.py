"""``nv-tileas-assign-layouts``: give every tile value of nv_tileaa IR a distribution over the CTA
(docs/layouts.md).

1. *Anchors*: global accesses through a memref (``tiled_load``/``tiled_store``) get a blocked
   layout whose fastest dim is the memref's unit-stride dim and whose per-thread vector width is
   the widest power of two (at most 16 bytes) that the access provably allows: base pointer
   alignment, the other strides, the start index and, for a masked (not ``in_bounds``) dim, the
   extent -- all from ``assume div_by`` facts and constants. Pointer-tile accesses (``load``,
   ``store``, gathers/scatters) are anchored with the default layout (width 1).
2. *Propagation* in program order: elementwise ops take their first laid-out operand's layout,
   ``reduce`` results a :class:`SliceLayout` of the input's, ``broadcast`` keeps its source's,
   ``view`` that re-inserts a reduced dim goes back to the slice's parent, ``permute`` permutes
   the blocked layout; loops/ifs carry layouts through iter args and yields. Values that are
   cheap to build anywhere (``splat``, ``make_range``, tile constants) stay *pending* and take
   their first consumer's layout.
3. *Conversions*: where a consumer needs another layout than its producer gave,
   ``nv_tileas.convert_layout`` is inserted before the consumer.

The CTA size is ``num_warps`` from the pass option, else ``nv_tileaa.kernel_spec`` (which carries
``tt.num_warps``), else 4 (seed 002's default).
"""

from __future__ import annotations

from math import gcd
from typing import Optional

from tilegen.runtime.attributes import DenseArrayAttr, DictAttr, DivByAttr, IntegerAttr
from tilegen.runtime.ir import Block, Operation, OpResult, Value
from tilegen.runtime.layouts.attrs import (
    BlockedLayout,
    DistributedLayout,
    SliceLayout,
    default_blocked,
)
from tilegen.runtime.passes.registry import register
from tilegen.runtime.rewrite import ir_utils as U
from tilegen.runtime.types import DYNAMIC, FloatType, IntegerType, NvMemRefType, TileType

DEFAULT_NUM_WARPS = 4
MAX_VECTOR_BYTES = 16
_DIV_CAP = 1 << 20

_CHEAP = {"nv_tileaa.splat", "nv_tileaa.make_range", "arith.constant"}
_MEM_ANCHORS = {"nv_tileaa.tiled_load", "nv_tileaa.tiled_store"}
_PTR_ANCHORS = {
    "nv_tileaa.load",
    "nv_tileaa.store",
    "nv_tileaa.gather_load",
    "nv_tileaa.scatter_store",
}


def _is_tile(t) -> bool:
    return isinstance(t, TileType) and t.rank >= 1


def _pow2_part(n: int) -> int:
    if n == 0:
        return _DIV_CAP
    n = abs(n)
    return min(n & -n, _DIV_CAP)


def divisibility(v: Value, depth: int = 0) -> int:
    """The largest power of two known to divide integer/pointer value ``v`` (1 if unknown)."""
    op = v.op if isinstance(v, OpResult) else None
    if op is None or depth > 32:
        return 1
    name = op.name
    if name == "arith.constant":
        a = op.attributes.get("value")
        return _pow2_part(a.value) if isinstance(a, IntegerAttr) else 1
    if name in ("nv_tileaa.assume", "cuda_tile.assume"):
        pred = op.attributes.get("predicate")
        inner = divisibility(op.operands[0], depth + 1)
        if isinstance(pred, DivByAttr) and pred.every is None:
            return max(inner, _pow2_part(pred.divisor))
        return inner
    if name == "arith.muli":
        d = divisibility(op.operands[0], depth + 1) * divisibility(op.operands[1], depth + 1)
        return min(d, _DIV_CAP)
    if name in ("arith.addi", "arith.subi"):
        return gcd(divisibility(op.operands[0], depth + 1), divisibility(op.operands[1], depth + 1))
    if name in ("arith.extsi", "arith.extui", "arith.index_cast", "arith.trunci"):
        return divisibility(op.operands[0], depth + 1)
    return 1


def element_bytes(t) -> int:
    if isinstance(t, (IntegerType, FloatType)):
        return max(1, t.width // 8)
    return 8  # pointers


def _pow2_floor(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


class AccessInfo:
    """Why an access got its vector width (for reports and tests)."""

    def __init__(self, op: Operation, order: tuple[int, ...], vec: int, limits: dict):
        self.op, self.order, self.vec, self.limits = op, order, vec, limits

    def __repr__(self) -> str:
        return f"AccessInfo({self.op.name}, order={self.order}, vec={self.vec}, {self.limits})"


def analyze_memref_access(op: Operation) -> Optional[AccessInfo]:
    """Order and vector width of a ``tiled_load``/``tiled_store`` through a memref."""
    od = op.opdef
    base = od.operand_group(op, "base")[0]
    mtype = base.type
    if not isinstance(mtype, NvMemRefType):
        return None
    tile = op.results[0].type if op.name == "nv_tileaa.tiled_load" else None
    if tile is None:
        tile = od.operand_group(op, "value")[0].type
    if not _is_tile(tile) or tile.rank != mtype.rank:
        return None
    strides = mtype.stride_values
    unit = [d for d in range(mtype.rank) if strides[d] == 1]
    if not unit:
        order = tuple(reversed(range(tile.rank)))
        return AccessInfo(op, order, 1, {"no unit-stride dim": 1})
    cd = unit[-1]
    rest = sorted(
        (d for d in range(tile.rank) if d != cd),
        key=lambda d: (-(strides[d] if strides[d] != DYNAMIC else _DIV_CAP), -d),
    )
    order = (cd,) + tuple(rest)
    ebytes = element_bytes(mtype.element)
    limits = {"16 bytes": MAX_VECTOR_BYTES // ebytes, "tile extent": tile.shape[cd]}
    mk = base.op if isinstance(base, OpResult) else None
    if mk is None or mk.name != "nv_tileaa.make_memref":
        limits["unknown memref origin"] = 1
    else:
        mod = mk.opdef
        ptr_align = divisibility(mod.operand_group(mk, "base")[0])
        limits["base alignment"] = max(1, ptr_align // ebytes)
        offset = mod.operand_group(mk, "offset")
        if offset:
            limits["memref offset"] = divisibility(offset[0])
        dyn_strides = iter(mod.operand_group(mk, "strides"))
        dyn_sizes = iter(mod.operand_group(mk, "sizes"))
        sizes = {}
        for d in range(mtype.rank):
            sizes[d] = mtype.shape[d] if mtype.shape[d] != DYNAMIC else next(dyn_sizes, None)
        for d in range(mtype.rank):
            s = strides[d] if mtype.strides else DYNAMIC
            if s == DYNAMIC:
                sv = next(dyn_strides, None)
                div = divisibility(sv) if sv is not None else 1
            else:
                div = _pow2_part(s)
            if d != cd:
                limits[f"stride of dim {d}"] = div
        in_bounds = op.attributes.get("in_bounds")
        masked = True
        if isinstance(in_bounds, DenseArrayAttr) and len(in_bounds.values) > cd:
            masked = not in_bounds.values[cd]
        if masked:
            size = sizes[cd]
            limits["extent of dim %d" % cd] = (
                _pow2_part(size) if isinstance(size, int) else divisibility(size) if size else 1
            )
    indices = od.operand_group(op, "indices")
    if len(indices) > cd:
        limits["start index"] = divisibility(indices[cd])
    if od.operand_group(op, "mask"):
        limits["mask"] = 1
    vec = _pow2_floor(min(limits.values()))
    return AccessInfo(op, order, vec, limits)


def kernel_spec_int(func: Operation, key: str) -> Optional[int]:
    """Integer ``key`` of the function's folded ``nv_tileaa.kernel_spec`` (None if absent)."""
    spec = func.attributes.get("nv_tileaa.kernel_spec")
    if isinstance(spec, DictAttr):
        for k, v in spec.items:
            if k == key and isinstance(v, IntegerAttr):
                return v.value
    return None


def enclosing_int_attr(op: Operation, name: str) -> Optional[int]:
    """Integer attribute ``name`` on ``op`` or the nearest enclosing op carrying it."""
    p = op
    while p is not None:
        a = p.attributes.get(name)
        if isinstance(a, IntegerAttr):
            return a.value
        p = p.parent_op
    return None


def kernel_num_warps(func: Operation) -> int:
    for n in (kernel_spec_int(func, "num_warps"), enclosing_int_attr(func, "tt.num_warps")):
        if n is not None:
            return n
    return DEFAULT_NUM_WARPS


def permute_layout(layout: BlockedLayout, perm: tuple[int, ...]) -> BlockedLayout:
    """The layout of ``permute(x, perm)`` when ``x`` has ``layout`` (result dim i = dim perm[i])."""
    return BlockedLayout(
        tuple(layout.size_per_thread[p] for p in perm),
        tuple(layout.threads_per_warp[p] for p in perm),
        tuple(layout.warps_per_cta[p] for p in perm),
        tuple(perm.index(o) for o in layout.order),
    )


def _target_sm(op) -> Optional[int]:
    """The compute capability the module around ``op`` was converted for (None if unknown)."""
    return enclosing_int_attr(op, "nv_tileaa.compute_capability")


def mma_accumulator_layout(op, num_warps: int, sm: Optional[int] = None) -> Optional[BlockedLayout]:
    """The accumulator layout codegen wants for ``dot`` ``op``: on sm_90 when the dot runs on
    ``wgmma`` (runtime/codegen/mma.py ``wgmma_plan``), :func:`wgmma_accumulator_layout`; else
    :func:`mma_sync_accumulator_layout`. ``sm`` defaults to the module's compute capability."""
    if op is None or op.name != "nv_tileaa.dot":
        return None
    from tilegen.runtime.codegen.mma import wgmma_plan

    if wgmma_plan(op, num_warps, _target_sm(op) if sm is None else sm) is not None:
        return wgmma_accumulator_layout(num_warps)
    return mma_sync_accumulator_layout(op, num_warps)


def wgmma_accumulator_layout(num_warps: int) -> BlockedLayout:
    """The blocked layout that is the ``wgmma`` m64nN accumulator fragment once codegen permutes
    the rows of A in shared memory (docs/tensor_cores.md): thread (lane, warp) holds rows
    8 warp + g (+ 8 num_warps r) and column pairs 8 j + 2t, 2t + 1."""
    return BlockedLayout((1, 2), (8, 4), (num_warps, 1), (1, 0))


def mma_sync_accumulator_layout(op, num_warps: int) -> Optional[BlockedLayout]:
    """The blocked layout that *is* the ``mma.sync`` accumulator fragment layout for ``dot``
    ``op`` (rows g and g + 8 of each 16-row MMA tile in registers, column pairs 2t, 2t + 1 per
    lane, warps side by side along N), or None when the shape does not fit it (the dot then
    stages its accumulator through shared memory)."""
    if op is None or op.name != "nv_tileaa.dot" or len(op.operands) < 3:
        return None
    c = op.operands[2].type
    if not _is_tile(c) or c.rank != 2:
        return None
    m, n = c.shape
    rows = 8 if isinstance(c.element, FloatType) and c.element.name == "f64" else 16
    if m % rows or n % (8 * num_warps):
        return None
    return BlockedLayout((1, 2), (8, 4), (1, num_warps), (1, 0))


def _accumulated_dot(y: Value, depth: int = 0) -> Optional[Operation]:
    """The ``dot`` whose result reaches the loop-carried value ``y`` through same-shape
    elementwise ops (``acc + dot(a, b, 0) * scale``: block-scaled GEMMs), or None."""
    op = y.op if isinstance(y, OpResult) else None
    if op is None or depth > 8 or not _is_tile(y.type):
        return None
    if op.name == "nv_tileaa.dot":
        return op
    if op.regions or not (U.has_trait(op, "Elementwise") or op.dialect in ("arith", "math")):
        return None
    for v in op.operands:
        if _is_tile(v.type) and v.type.shape == y.type.shape:
            d = _accumulated_dot(v, depth + 1)
            if d is not None:
                return d
    return None


class LayoutAssigner:
    def __init__(self, func: Operation, num_warps: int):
        self.func = func
        self.num_warps = num_warps
        self.layout: dict[Value, DistributedLayout] = {}
        #: pending value -> pending operands that must follow it
        self.pending: dict[Value, list[Value]] = {}
        self.accesses: list[AccessInfo] = []
        self.converts = 0

    # ----- helpers
    def default(self, t: TileType) -> DistributedLayout:
        return default_blocked(t.shape, self.num_warps)

    def resolve(self, v: Value, layout: DistributedLayout) -> None:
        if v in self.pending:
            links = self.pending.pop(v)
            self.layout[v] = layout
            for w in links:
                if w in self.pending and w.type.rank == v.type.rank:
                    self.resolve(w, layout)

    def get(self, v: Value) -> DistributedLayout:
        """``v``'s layout, fixing a pending one to the default."""
        if v in self.pending:
            self.resolve(v, self.default(v.type))
        return self.layout[v]

    def require(self, op: Operation, index: int, layout: DistributedLayout) -> None:
        """Operand ``index`` of ``op`` must arrive in ``layout``."""
        v = op.operands[index]
        if not _is_tile(v.type) or (v not in self.layout and v not in self.pending):
            return
        if v in self.pending:
            self.resolve(v, layout)
            return
        if self.layout[v] == layout or self.retarget(v, layout):
            return
        conv = Operation("nv_tileas.convert_layout", [v], [v.type], loc=op.loc)
        self.layout[conv.results[0]] = layout
        block = op.parent
        block.insert(block.ops.index(op), conv)
        op.set_operand(index, conv.results[0])
        self.converts += 1

    def retarget(self, v: Value, layout: DistributedLayout) -> bool:
        """Give single-use ``v``, made by a broadcast or a view inserting a unit dim, ``layout``
        directly and require its source in the matching layout instead: the conversion then
        moves the smaller source tile (Triton's backward rematerialization, one step at a
        time)."""
        prod = v.op if isinstance(v, OpResult) else None
        if prod is None or len(v.uses) != 1 or not isinstance(layout, BlockedLayout):
            return False
        src = prod.operands[0] if prod.operands else None
        if src is None or not _is_tile(src.type):
            return False
        if prod.name == "nv_tileaa.broadcast" and src.type.rank == v.type.rank:
            self.layout[v] = layout
            self.require(prod, 0, layout)
            return True
        if prod.name in ("nv_tileaa.view", "nv_tileaa.expand_dims"):
            ss, rs = src.type.shape, v.type.shape
            for d in range(len(rs)):
                if rs[d] == 1 and rs[:d] + rs[d + 1 :] == ss:
                    self.layout[v] = layout
                    self.require(prod, 0, SliceLayout(d, layout))
                    return True
        return False

    def tile_operands(self, op: Operation) -> list[int]:
        return [
            i
            for i, v in enumerate(op.operands)
            if _is_tile(v.type) and (v in self.layout or v in self.pending)
        ]

    # ----- walk
    def run(self) -> None:
        for region in self.func.regions:
            for block in region.blocks:
                for arg in block.args:
                    if _is_tile(arg.type):
                        self.layout[arg] = self.default(arg.type)
                self.run_block(block)
        for v in list(self.pending):
            if v in self.pending:
                self.get(v)
        for v, layout in self.layout.items():
            t = v.type
            v.type = TileType(t.shape, t.element, layout)

    def run_block(self, block: Block) -> None:
        for op in list(block.ops):
            self.visit(op)

    def visit(self, op: Operation) -> None:
        name = op.name
        tiles = [r for r in op.results if _is_tile(r.type)]
        if name in _MEM_ANCHORS or name in _PTR_ANCHORS:
            info = analyze_memref_access(op) if name in _MEM_ANCHORS else None
            if info is not None:
                self.accesses.append(info)
            t = (
                op.results[0].type
                if "load" in name
                else op.opdef.operand_group(op, "value")[0].type
            )
            if not _is_tile(t):
                return
            anchor = (
                default_blocked(t.shape, self.num_warps, info.vec, info.order)
                if info is not None
                else self.default(t)
            )
            if info is not None and "store" in name:
                # a stored value already distributed along the contiguous dim with at least the
                # access's width is stored as is (no conversion through shared memory)
                val = op.opdef.operand_group(op, "value")[0]
                cur = self.layout.get(val) if val not in self.pending else None
                if isinstance(cur, BlockedLayout) and cur.order[0] == info.order[0]:
                    if cur.size_per_thread[info.order[0]] >= info.vec:
                        anchor = cur
            for r in tiles:
                if r.type.shape == t.shape:
                    self.layout[r] = anchor
            for i in self.tile_operands(op):
                if op.operands[i].type.shape == t.shape:
                    self.require(op, i, anchor)
                else:
                    self.get(op.operands[i])
            return
        if name == "nv_tileaa.dot" and tiles:
            mma = mma_accumulator_layout(op, self.num_warps)
            for i in self.tile_operands(op)[:2]:
                self.get(op.operands[i])
            if mma is None:
                c = self.get(op.operands[2])
                self.layout[tiles[0]] = c
                return
            self.require(op, 2, mma)
            self.layout[tiles[0]] = mma
            return
        if name == "nv_tileaa.reduce":
            srcs = [self.get(op.operands[i]) for i in self.tile_operands(op)]
            axis = op.attributes["axis"].value
            for k, r in enumerate(op.results):  # result k reduces input k
                if _is_tile(r.type) and k < len(srcs):
                    self.layout[r] = SliceLayout(axis, srcs[k])
            for region in op.regions:
                for b in region.blocks:
                    self.run_block(b)
            return
        if name == "scf.for":
            self.visit_for(op)
            return
        if name == "scf.if":
            self.visit_if(op)
            return
        if name in _CHEAP and tiles:
            for r in tiles:
                self.pending[r] = []
            return
        if name in ("nv_tileaa.view", "nv_tileaa.expand_dims") and tiles:
            src_v = op.operands[0]
            src = self.get(src_v)
            out = tiles[0].type
            if isinstance(src, SliceLayout) and out.shape == src.parent_shape(src_v.type.shape):
                self.layout[tiles[0]] = src.parent
            elif out.shape == src_v.type.shape:
                self.layout[tiles[0]] = src
            else:
                self.layout[tiles[0]] = self.default(out)
            return
        if name == "nv_tileaa.permute" and tiles:
            src = self.get(op.operands[0])
            perm = tuple(op.attributes["permutation"].values)
            if isinstance(src, BlockedLayout):
                self.layout[tiles[0]] = permute_layout(src, perm)
            else:
                self.layout[tiles[0]] = self.default(tiles[0].type)
            return
        if self.is_elementwise(op, tiles):
            ops_ = self.tile_operands(op)
            fixed = [i for i in ops_ if op.operands[i] not in self.pending]
            if not fixed:
                for r in tiles:
                    self.pending[r] = [op.operands[i] for i in ops_]
                return
            layout = self.layout[op.operands[fixed[0]]]
            for i in ops_:
                self.require(op, i, layout)
            for r in tiles:
                self.layout[r] = layout
            for region in op.regions:
                for b in region.blocks:
                    self.run_block(b)
            return
        # anything else: operands are materialized; a tile result follows the first tile operand
        # of its shape (an atomic's result, a scan's) or gets the default layout
        ins = [op.operands[i] for i in self.tile_operands(op)]
        for v in ins:
            self.get(v)
        for r in tiles:
            same = [v for v in ins if v.type.shape == r.type.shape]
            self.layout[r] = self.layout[same[0]] if same else self.default(r.type)
        for region in op.regions:
            for b in region.blocks:
                for arg in b.args:
                    if _is_tile(arg.type):
                        self.layout[arg] = self.default(arg.type)
                self.run_block(b)

    def is_elementwise(self, op: Operation, tiles: list) -> bool:
        if not tiles:
            return False
        if op.name == "nv_tileaa.broadcast":
            src = op.operands[0].type
            return _is_tile(src) and src.rank == tiles[0].type.rank
        if U.has_trait(op, "Elementwise"):
            return True
        if op.regions or op.opdef is not None and op.dialect not in ("arith", "math"):
            return False
        shape = tiles[0].type.shape
        return all(r.type.shape == shape for r in tiles) and all(
            v.type.shape == shape for v in op.operands if _is_tile(v.type)
        )

    def visit_for(self, op: Operation) -> None:
        # operands: lb, ub, step, inits...; body args: iv, iter args...; results: one per init
        n = len(op.results)
        inits = list(range(len(op.operands) - n, len(op.operands)))
        body = op.regions[0].blocks[0]
        carried = []
        term = body.terminator
        for k, i in enumerate(inits):
            v = op.operands[i]
            y = term.operands[k] if term is not None and k < len(term.operands) else None
            dot = _accumulated_dot(y) if isinstance(y, OpResult) else None
            acc = mma_accumulator_layout(dot, self.num_warps) if dot is not None else None
            if acc is not None and _is_tile(v.type):
                # an MMA accumulator carried by the loop keeps the MMA layout throughout
                self.require(op, i, acc)
                layout = acc
            elif _is_tile(v.type) and (v in self.layout or v in self.pending):
                layout = self.get(v)
            elif _is_tile(v.type):
                layout = self.default(v.type)
            else:
                carried.append(None)
                continue
            carried.append(layout)
            self.layout[body.args[k + 1]] = layout
            self.layout[op.results[k]] = layout
        self.run_block(body)
        self.fix_yield(body, carried)

    def visit_if(self, op: Operation) -> None:
        results: list = [None] * len(op.results)
        for region in op.regions:
            for b in region.blocks:
                self.run_block(b)
        then = op.regions[0].blocks[0] if op.regions and op.regions[0].blocks else None
        if then is not None and then.terminator is not None:
            for k, v in enumerate(then.terminator.operands):
                if k < len(results) and _is_tile(v.type):
                    results[k] = self.get(v)
        for k, r in enumerate(op.results):
            if _is_tile(r.type):
                results[k] = results[k] or self.default(r.type)
                self.layout[r] = results[k]
        for region in op.regions:
            for b in region.blocks:
                self.fix_yield(b, results)

    def fix_yield(self, block: Block, layouts: list) -> None:
        term = block.terminator
        if term is None:
            return
        for k, layout in enumerate(layouts):
            if layout is not None and k < len(term.operands):
                self.require(term, k, layout)


def assign_layouts(root: Operation, num_warps: int = 0) -> list[LayoutAssigner]:
    """Assign layouts in every ``nv_tileaa.func`` under ``root``; returns one assigner each."""
    out = []
    for op in list(root.walk()):
        if op.name == "nv_tileaa.func":
            a = LayoutAssigner(op, num_warps or kernel_num_warps(op))
            a.run()
            out.append(a)
    return out


def unassigned_tiles(root: Operation) -> list[Value]:
    """Tile values (rank >= 1) under ``root`` that carry no layout encoding."""
    out = []
    for op in root.walk():
        vals = list(op.results)
        for region in op.regions:
            for b in region.blocks:
                vals.extend(b.args)
        out.extend(v for v in vals if _is_tile(v.type) and v.type.encoding is None)
    return out


@register(
    "nv-tileas-assign-layouts",
    options={"num-warps": (int, 0)},
    summary="assign nv_tileas layouts to the tile values of nv_tileaa functions",
)
def _pass(op: Operation, options: dict) -> None:
    assign_layouts(op, options.get("num-warps", 0))
