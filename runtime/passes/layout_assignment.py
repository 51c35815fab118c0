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
4. *Decisions* recorded for code generation (runtime/layouts/decisions.py; docs/layouts.md,
   "The layout stage's decisions"): the CTA size, each memref access's vector width, each dot's
   MMA family, which dot operands are staged by cp.async and which K loops prefetch them.

The CTA size is ``num_warps`` from the pass option, else ``nv_tileaa.kernel_spec`` (which carries
``tt.num_warps``), else 4 (seed 002's default). The analyses live in runtime/layouts/ (shared
with code generation, which never imports this module).
"""

from __future__ import annotations

from math import prod as _prod

from typing import Optional

from tilegen.runtime.ir import Block, Operation, OpResult, Value
from tilegen.runtime.layouts import decisions as D
from tilegen.runtime.layouts.axis_info import AxisInfo, analyze_pointer_access
from tilegen.runtime.layouts.access import (  # noqa: F401 (divisibility, element_bytes: API)
    AccessInfo,
    analyze_memref_access,
    divisibility,
    element_bytes,
)
from tilegen.runtime.layouts.attrs import (
    BlockedLayout,
    DistributedLayout,
    SliceLayout,
    default_blocked,
    unit_dims_view,
)
from tilegen.runtime.layouts.kernel import (  # noqa: F401 (DEFAULT_NUM_WARPS: API)
    DEFAULT_NUM_WARPS,
    default_num_warps,
    kernel_num_stages,
    kernel_num_warps,
    target_sm,
)
from tilegen.runtime.layouts.mma_choice import accumulator_layout, choose_dot_family
from tilegen.runtime.layouts.staging import cp_async_width, pipeline_loads, through_registers
from tilegen.runtime.options import current
from tilegen.runtime.passes.registry import parse_bool, register
from tilegen.runtime.rewrite import ir_utils as U
from tilegen.runtime.types import TileType

_CHEAP = {"nv_tileaa.splat", "nv_tileaa.make_range", "arith.constant"}
_VIEWS = ("nv_tileaa.view", "nv_tileaa.expand_dims")


def _elements(t) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n


def _whole_in_thread(layout, shape) -> bool:
    """``layout`` is blocked and gives each thread the whole of a ``shape`` tile (a row of the
    tcgen05 accumulator's layout): converting a value into it is a whole-row exchange, every
    thread reading all of it, where recomputing it is one add per element from one base. (In
    wgmma's layouts, a quarter of a row a thread, the exchange is cheaper and the recomputed
    registers spilled more under ptxas: TileGym's attention sink on sm_90a, 416 -> 808 B.)"""
    return isinstance(layout, BlockedLayout) and all(
        n <= spt for n, spt in zip(shape, layout.size_per_thread)
    )


def _inserted_unit_dim(view: Operation) -> Optional[int]:
    """The dim a ``view`` / ``expand_dims`` inserts (its result is its source with one unit dim
    added there), else None."""
    if not view.operands or not _is_tile(view.operands[0].type):
        return None
    ss, rs = tuple(view.operands[0].type.shape), tuple(view.results[0].type.shape)
    for d in range(len(rs)):
        if rs[d] == 1 and rs[:d] + rs[d + 1 :] == ss:
            return d
    return None


_MEM_ANCHORS = {"nv_tileaa.tiled_load", "nv_tileaa.tiled_store"}
_PTR_ANCHORS = {
    "nv_tileaa.load",
    "nv_tileaa.store",
    "nv_tileaa.gather_load",
    "nv_tileaa.scatter_store",
}
#: atomics: every tile operand of the result's shape (pointers, value / compare + replacement,
#: mask) and the result share one layout (the verifier requires result == value type)
_ATOMICS = {"nv_tileaa.atomic_rmw", "nv_tileaa.atomic_cas", "nv_tileaa.tiled_atomic_rmw"}


def _is_tile(t) -> bool:
    return isinstance(t, TileType) and t.rank >= 1


def permute_layout(layout: BlockedLayout, perm: tuple[int, ...]) -> BlockedLayout:
    """The layout of ``permute(x, perm)`` when ``x`` has ``layout`` (result dim i = dim perm[i])."""
    return BlockedLayout(
        tuple(layout.size_per_thread[p] for p in perm),
        tuple(layout.threads_per_warp[p] for p in perm),
        tuple(layout.warps_per_cta[p] for p in perm),
        tuple(perm.index(o) for o in layout.order),
    )


def _copies(lay: BlockedLayout, shape) -> int:
    """How many threads hold each element of a ``shape`` tile in blocked layout ``lay``."""
    distinct = 1
    for n, spt, t, w in zip(shape, lay.size_per_thread, lay.threads_per_warp, lay.warps_per_cta):
        distinct *= min(t * w, max(1, -(-n // spt)))
    return max(1, _prod(lay.threads_per_warp) * _prod(lay.warps_per_cta) // distinct)


class LayoutOptions:
    """The choices of ``nv-tileas-assign-layouts`` (its pass options): CTA size (0: what the
    kernel asks for), whether dots may use wgmma (tcgen05), whether dot operands may be staged by
    cp.async, whether K loops may be pipelined, and the stage count (0: the kernel's). A choice
    left unset (None, 0) is the compile's (runtime/options.py :func:`current`: the driver's
    CompileOptions while it runs the stage, the defaults elsewhere)."""

    def __init__(
        self,
        num_warps: int = 0,
        wgmma: Optional[bool] = None,
        cp_async: Optional[bool] = None,
        pipeline: Optional[bool] = None,
        num_stages: int = 0,
        tcgen05: Optional[bool] = None,
    ):
        compile_options = current()
        self.num_warps = num_warps or compile_options.num_warps or 0
        self.wgmma = compile_options.use_wgmma if wgmma is None else wgmma
        self.tcgen05 = compile_options.use_tcgen05 if tcgen05 is None else tcgen05
        self.cp_async = compile_options.use_cp_async if cp_async is None else cp_async
        self.pipeline = self.cp_async and (
            compile_options.pipelining if pipeline is None else pipeline
        )
        self.num_stages = num_stages or compile_options.num_stages or 0


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
    def __init__(self, func: Operation, num_warps: int, options: Optional[LayoutOptions] = None):
        self.func = func
        self.num_warps = num_warps
        self.options = options or LayoutOptions()
        self.sm = target_sm(func)
        self.layout: dict[Value, DistributedLayout] = {}
        #: pending value -> pending operands that must follow it
        self.pending: dict[Value, list[Value]] = {}
        self.accesses: list[AccessInfo] = []
        self.converts = 0
        self._families: dict[Operation, Optional[str]] = {}
        #: the MMA accumulator layouts given to dot results: elementwise ops prefer them
        self.mma_layouts: set = set()
        #: broadcasts whose result took its consumers' layout: their sources follow at the end
        self.late_broadcasts: list = []
        #: contiguity / divisibility / constancy of pointer-tile accesses (layouts/axis_info.py)
        self.axis = AxisInfo()

    def dot_family(self, op: Operation) -> Optional[str]:
        """The instruction family of ``dot`` ``op`` (decided once, recorded on the op)."""
        if op not in self._families:
            fam = choose_dot_family(
                op, self.num_warps, self.sm, self.options.wgmma, self.options.tcgen05
            )
            self._families[op] = fam
            if fam is not None:
                D.set_str(op, D.MMA, fam)
        return self._families[op]

    def mma_accumulator(self, op: Operation) -> Optional[BlockedLayout]:
        if op is None or op.name != "nv_tileaa.dot":
            return None
        acc = accumulator_layout(op, self.num_warps, self.dot_family(op))
        if acc is not None:
            self.mma_layouts.add(acc)
        return acc

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
        if self.rematerialize(op, index, layout):
            return
        conv = Operation("nv_tileas.convert_layout", [v], [v.type], loc=op.loc)
        self.layout[conv.results[0]] = layout
        block = op.parent
        block.insert(block.ops.index(op), conv)
        op.set_operand(index, conv.results[0])
        self.converts += 1

    def _stored(self, op: Operation) -> Optional[Value]:
        """The value a store writes, where the stage has given it a layout already."""
        val = op.opdef.operand_group(op, "value")[0]
        return None if val in self.pending else val

    def _exchange_too_big(self, t: TileType) -> bool:
        """Whether a layout conversion of tile type ``t`` through shared memory (4 bytes an
        element at least) needs more than the target's opt-in shared memory."""
        from tilegen.runtime.layouts.access import element_bytes
        from tilegen.runtime.targets import shared_optin

        if self.sm is None:
            return False
        return _elements(t) * max(4, element_bytes(t.element)) > shared_optin(self.sm)

    def retarget(self, v: Value, layout: DistributedLayout) -> bool:
        """Give single-use ``v`` ``layout`` directly, where moving its operands instead is
        cheaper (Triton's backward rematerialization, one step at a time): a conversion's
        result (one conversion then), a ``splat`` / ``make_range`` / constant (computed in any
        layout), a ``tiled_load`` of one element per access wanted in an MMA layout (loaded in
        it), a broadcast or a view inserting a unit dim (the smaller source moves), and an
        elementwise op when the layout is an MMA accumulator's (attention's causal mask meets
        ``QK^T`` in it) or when its operands are such cheap index computations themselves
        (attention's column indices ``j * TN + arange(TN)``)."""
        prod = v.op if isinstance(v, OpResult) else None
        if prod is None or v.num_uses != 1:
            return False
        if prod.name == "nv_tileas.convert_layout":  # one conversion, to the new layout
            self.layout[v] = layout
            return True
        if prod.name in _CHEAP:
            self.layout[v] = layout
            return True
        if (
            prod.name == "nv_tileaa.tiled_load"
            and v is prod.results[0]
            and (
                (D.vector_width(prod) == 1 and layout in self.mma_layouts)
                or self._exchange_too_big(v.type)
                or (layout in self.mma_layouts and _loop_init_loaded_whole(v, layout))
            )
        ):
            # a load that gains nothing from its anchor (one element per access: the
            # block-scaled GEMM's 128 x 1 scale column) loads in the MMA layout it meets, and so
            # does one whose conversion would not fit in shared memory (C as a 256 x 128 f32
            # initial accumulator on sm_120)
            self.layout[v] = layout
            for i in self.tile_operands(prod):
                if prod.operands[i].type.shape == v.type.shape:
                    self.require(prod, i, layout)
            return True
        src = prod.operands[0] if prod.operands else None
        if src is None or not _is_tile(src.type):
            return False
        if self._relayable(prod, v) and (layout in self.mma_layouts or self._cheap(v)):
            self.layout[v] = layout
            for i in self.tile_operands(prod):
                self.require(prod, i, layout)
            return True
        if prod.name == "nv_tileaa.broadcast" and src.type.rank == v.type.rank:
            self.layout[v] = layout
            self.require(prod, 0, layout)
            return True
        if prod.name in ("nv_tileaa.view", "nv_tileaa.expand_dims"):
            if not isinstance(layout, BlockedLayout):
                return False
            ss, rs = src.type.shape, v.type.shape
            for d in range(len(rs)):
                if rs[d] == 1 and rs[:d] + rs[d + 1 :] == ss:
                    self.layout[v] = layout
                    self.require(prod, 0, SliceLayout(d, layout))
                    return True
            return self._batched_init(prod, v, layout)
        return False

    def _batched_init(self, view: Operation, v: Value, layout: BlockedLayout) -> bool:
        """A batched array's C, ``view`` (dropping the unit dims of a ``(1, M, N)`` load) on its
        way to a loop's initial value, wanted in an MMA accumulator's ``layout``: the load takes
        that layout with the unit dims put back (``unit_dims_view``: the same registers, so
        the view costs nothing), as a 2-d C does (``_loop_init_loaded_whole``). Its conversion
        would have cost an exchange the size of the tile (128 KB for 128 x 256 f32: more
        than sm_120 has)."""
        src = view.operands[0]
        load = src.op if isinstance(src, OpResult) else None
        if (
            load is None
            or load.name != "nv_tileaa.tiled_load"
            or src is not load.results[0]
            or src.num_uses != 1
            or layout not in self.mma_layouts
            or not _loop_init_loaded_whole(v, layout)
        ):
            return False
        wide = unit_dims_view(layout, tuple(v.type.shape), tuple(src.type.shape))
        if wide is None:
            return False
        self.layout[v] = layout
        if self.layout.get(src) != wide:
            self.layout[src] = wide
            for i in self.tile_operands(load):
                if load.operands[i].type.shape == src.type.shape:
                    self.require(load, i, wide)
        return True

    def rematerialize(self, op: Operation, index: int, layout: DistributedLayout) -> bool:
        """Operand ``index`` of ``op`` is a broadcast (same rank) or a ``splat`` /
        ``make_range`` / constant that others use too: a copy of it in ``layout`` for ``op``
        alone, the broadcast's smaller source converted instead; or an index computation
        (:meth:`_index_expr`, an elementwise op or a view inserting a unit dim at its top)
        recomputed. (Attention's column indices ``broadcast(j * TN + arange(TN))``, compared
        twice with the rows in ``QK^T``'s accumulator layout, cost two 128 KB exchanges an
        iteration at 256 x 128; ``(j * TN + arange(TN))[None, :]`` met twice in an mma.sync
        accumulator, an exchange and two barriers an iteration, section 49.)"""
        v = op.operands[index]
        prod = v.op if isinstance(v, OpResult) else None
        if prod is None or prod.regions or len(prod.results) != 1:
            return False
        broadcast = prod.name == "nv_tileaa.broadcast" and prod.operands[0].type.rank == v.type.rank
        if not broadcast and prod.name not in _CHEAP:
            relay = self._relayable(prod, v) or prod.name in _VIEWS
            if relay and self._index_expr(v, [0], layout):
                op.set_operand(index, self._recompute(v, layout, op))
                return True
            return False
        copy = self._copy_before(prod, list(prod.operands), layout, op)
        op.set_operand(index, copy.results[0])
        if broadcast:
            self.require(copy, 0, layout)
        return True

    def _copy_before(
        self, prod: Operation, operands: list, layout: DistributedLayout, at: Operation
    ) -> Operation:
        """A copy of one-result ``prod`` on ``operands``, inserted before ``at``, its result
        in ``layout``."""
        copy = Operation(
            prod.name,
            operands,
            [prod.results[0].type],
            attributes=dict(prod.attributes),
            loc=prod.loc,
            opdef=prod.opdef,
            properties=dict(prod.properties) if getattr(prod, "properties", None) else None,
        )
        block = at.parent
        block.insert(block.ops.index(at), copy)
        self.layout[copy.results[0]] = layout
        return copy

    def _index_expr(self, v: Value, count: list, layout: DistributedLayout) -> bool:
        """``v`` is an index computation built from scalars alone (``splat``, ``make_range``,
        constants, broadcasts of them, views inserting a unit dim, elementwise ops), of at
        most 8 ops, its values used elsewhere too (unlike :meth:`_cheap`): recomputed for one
        consumer in its ``layout`` (dK dV's LSE / Delta gathers: pointers and masks from
        ``base + m * TM + arange``; attention's column indices ``j * TN + arange(TN)[None, :]``
        compared in a row-per-thread layout or an MMA accumulator's, through a view in the
        slice of either; Gemma's window ``rows - cols`` through a
        broadcast of the 256 x 1 rows, whose source is converted instead)."""
        prod = v.op if isinstance(v, OpResult) else None
        if prod is None or prod.regions or len(prod.results) != 1 or count[0] >= 8:
            return False
        count[0] += 1
        if prod.name in _CHEAP:
            return True
        tiles = [w for w in prod.operands if _is_tile(w.type)]
        if prod.name in _VIEWS:  # its source in the slice of ``layout``
            d = _inserted_unit_dim(prod)
            return (
                d is not None
                and (_whole_in_thread(layout, v.type.shape) or layout in self.mma_layouts)
                and self._index_expr(tiles[0], count, SliceLayout(d, layout))
            )
        if prod.name == "nv_tileaa.broadcast":  # (same rank: the source moves with it)
            # a scalar's splat, or a source an eighth of the result or smaller (the rows of
            # Gemma's window mask, 256 x 1 under 256 x 128): converting it is the cheap part
            return all(
                isinstance(w, OpResult)
                and w.type.rank == v.type.rank
                and (w.op.name in _CHEAP or 8 * _elements(w.type) <= _elements(v.type))
                for w in tiles
            )
        if not self._relayable(prod, v):
            return False
        return bool(tiles) and all(self._index_expr(w, count, layout) for w in tiles)

    def _recompute(self, v: Value, layout: DistributedLayout, at: Operation) -> Value:
        """A copy of index computation ``v`` (:meth:`_index_expr`) in ``layout``, before
        ``at``; a broadcast's source is converted (it is one scalar's splat)."""
        prod = v.op
        operands = list(prod.operands)
        if prod.name in _VIEWS:
            d = _inserted_unit_dim(prod)
            operands[0] = self._recompute(operands[0], SliceLayout(d, layout), at)
        elif prod.name not in _CHEAP and prod.name != "nv_tileaa.broadcast":
            for i, w in enumerate(operands):
                if _is_tile(w.type):
                    operands[i] = self._recompute(w, layout, at)
        copy = self._copy_before(prod, operands, layout, at)
        if prod.name == "nv_tileaa.broadcast":
            self.require(copy, 0, layout)
        return copy.results[0]

    def _cheap(self, v: Value, depth: int = 0) -> bool:
        """``v`` is built from scalars alone (``splat``, ``make_range``, constants, through
        broadcasts and elementwise ops), each op used once: recomputing it in another layout
        costs a few instructions per register, converting it a trip through shared memory."""
        prod = v.op if isinstance(v, OpResult) else None
        if prod is None or depth > 6 or v.num_uses != 1:
            return False
        if prod.name in _CHEAP:
            return True
        tiles = [w for w in prod.operands if _is_tile(w.type)]
        if prod.name == "nv_tileaa.broadcast" or self._relayable(prod, v):
            return bool(tiles) and all(self._cheap(w, depth + 1) for w in tiles)
        return False

    def _relayable(self, prod: Operation, v: Value) -> bool:
        """``prod`` (making ``v``) is a plain elementwise op whose tile operands all have
        ``v``'s shape."""
        if prod.regions or prod.name == "nv_tileaa.dot" or len(prod.results) != 1:
            return False
        if not (U.has_trait(prod, "Elementwise") or prod.dialect in ("arith", "math")):
            return False
        return all(op.type.shape == v.type.shape for op in prod.operands if _is_tile(op.type))

    def tile_operands(self, op: Operation) -> list[int]:
        return [
            i
            for i, v in enumerate(op.operands)
            if _is_tile(v.type) and (v in self.layout or v in self.pending)
        ]

    # ----- walk
    def run(self) -> None:
        for op in self.func.walk():
            D.clear(op)
        D.set_int(self.func, D.NUM_WARPS, self.num_warps)
        for region in self.func.regions:
            for block in region.blocks:
                for arg in block.args:
                    if _is_tile(arg.type):
                        self.layout[arg] = self.default(arg.type)
                self.run_block(block)
        for v in list(self.pending):
            if v in self.pending:
                self.get(v)
        for op in self.late_broadcasts:
            self.require(op, 0, self.layout[op.results[0]])
        for v, layout in self.layout.items():
            t = v.type
            v.type = TileType(t.shape, t.element, layout)
        self.decide_staging()

    def decide_staging(self) -> None:
        """On the laid-out IR: which loads are staged for their dots by cp.async, and which
        K loops prefetch them (runtime/layouts/staging.py)."""
        if not self.options.cp_async:
            return
        staged = set()
        for op in self.func.walk():
            width = cp_async_width(op) if op.name == "nv_tileaa.tiled_load" else 0
            if width:
                D.set_int(op, D.CP_ASYNC, width)
                if not through_registers(op, width):
                    staged.add(op)
        stages = self.options.num_stages or kernel_num_stages(self.func)
        if not staged or not self.options.pipeline or stages < 2:
            return
        done: set = set()
        for op in self.func.walk():  # outer loops first; none inside a pipelined one
            if op.name != "scf.for" or op in done:
                continue
            loads = pipeline_loads(op, staged)
            if loads:
                D.set_int(op, D.NUM_STAGES, stages)
                for ld in loads:
                    D.set_unit(ld, D.PREFETCH)
                done.update(o for o in op.walk() if o.name == "scf.for")

    def run_block(self, block: Block) -> None:
        for op in list(block.ops):
            self.visit(op)

    def visit(self, op: Operation) -> None:
        name = op.name
        tiles = [r for r in op.results if _is_tile(r.type)]
        if name in _MEM_ANCHORS or name in _PTR_ANCHORS:
            if name in _MEM_ANCHORS:
                info = analyze_memref_access(op)
            else:  # through a pointer tile: anchored by its vector width where it has one
                info = analyze_pointer_access(op, self.axis)
                info = info if info is not None and info.vec > 1 else None
            if info is not None:
                self.accesses.append(info)
                D.set_int(op, D.VECTOR_WIDTH, info.vec)
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
                inner = info.order[0]
                if isinstance(cur, BlockedLayout):
                    spt = cur.size_per_thread
                    # registers run along the contiguous dim first, or only along it (a
                    # tcgen05 accumulator's rows: a vector per register run, not per lane)
                    along = cur.order[0] == inner and spt[inner] >= info.vec
                    only = all(n == 1 for d, n in enumerate(spt) if d != inner)
                    if along or (only and spt[inner] >= max(info.vec, 2)):
                        anchor = cur
            if "store" in name and anchor != self.layout.get(self._stored(op)):
                cur = self.layout.get(self._stored(op))
                if isinstance(cur, BlockedLayout) and self._exchange_too_big(t):
                    # the conversion's scratch would not fit in the SM's shared memory (a 256 x
                    # 128 f32 accumulator on sm_120): stored as it is, uncoalesced, not refused
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
            mma = self.mma_accumulator(op)
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
            # the operands reduce together (argmax's values and indices): one layout for all,
            # the first laid-out operand's
            idx = self.tile_operands(op)
            fixed = [i for i in idx if op.operands[i] not in self.pending]
            common = self.layout[op.operands[fixed[0]]] if fixed else self.get(op.operands[idx[0]])
            for i in idx:
                self.require(op, i, common)
            srcs = [common] * len(idx)
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
                squeezed = None
                if isinstance(src, BlockedLayout):
                    squeezed = unit_dims_view(src, tuple(src_v.type.shape), tuple(out.shape))
                self.layout[tiles[0]] = squeezed or self.default(out)
            return
        if name == "nv_tileaa.permute" and tiles:
            src = self.get(op.operands[0])
            perm = tuple(op.attributes["permutation"].values)
            if isinstance(src, BlockedLayout):
                self.layout[tiles[0]] = permute_layout(src, perm)
            else:
                self.layout[tiles[0]] = self.default(tiles[0].type)
            return
        if name in _ATOMICS and tiles:
            self.visit_atomic(op, tiles[0])
            return
        if name == "nv_tileaa.broadcast" and tiles and self._spread_over_ones(op):
            # kept, the source's layout would copy each element into more threads than need
            # it: the result waits for its consumers' layout (else the default), and the
            # source is required in it once that is known (run's end)
            self.pending[tiles[0]] = []
            self.late_broadcasts.append(op)
            return
        if self.is_elementwise(op, tiles):
            ops_ = self.tile_operands(op)
            fixed = [i for i in ops_ if op.operands[i] not in self.pending]
            if not fixed:
                for r in tiles:
                    self.pending[r] = [op.operands[i] for i in ops_]
                return
            # an operand in an MMA accumulator layout wins (the other operands move, not the
            # dot's result: attention's masked QK^T), then one in a slice of it (a row max of
            # QK^T against a running max carried as a 1-d tile: the running max moves, once,
            # before the loop - carry_converted - not twice an iteration), else the first
            # laid-out operand's
            lays = [self.layout[op.operands[i]] for i in fixed]
            layout = next(
                (x for x in lays if x in self.mma_layouts),
                next(
                    (
                        x
                        for x in lays
                        if isinstance(x, SliceLayout) and x.parent in self.mma_layouts
                    ),
                    lays[0],
                ),
            )
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

    def visit_atomic(self, op: Operation, result: Value) -> None:
        """An atomic's old-value result, its data operands, its pointer tile and its mask are
        one per element: they take the first laid-out operand of the result's shape (the
        pointer tile, usually: no conversion of addresses), else the default layout; the
        others are required in it."""
        shape = result.type.shape
        same = [i for i in self.tile_operands(op) if op.operands[i].type.shape == shape]
        fixed = [i for i in same if op.operands[i] not in self.pending]
        layout = self.layout[op.operands[fixed[0]]] if fixed else self.default(result.type)
        for i in self.tile_operands(op):
            if i in same:
                self.require(op, i, layout)
            else:
                self.get(op.operands[i])
        self.layout[result] = layout

    def _spread_over_ones(self, op: Operation) -> bool:
        """Whether broadcast ``op``'s result, kept in its laid-out source's layout, would hold
        each element in more threads than the result shape's default layout does (a
        one-element extract's default layout spreads 128 threads along a dim the broadcast
        widens to 8: every thread then held 128 elements). A layout whose copies match a
        consumer (a row vector in an MMA accumulator's layout) replicates no more than the
        default and stays."""
        src = op.operands[0]
        if not _is_tile(src.type) or src in self.pending or src not in self.layout:
            return False
        lay = self.layout[src]
        out = op.results[0].type
        if not isinstance(lay, BlockedLayout) or src.type.rank != out.rank:
            return False
        default = self.default(out)
        return isinstance(default, BlockedLayout) and _copies(lay, out.shape) > _copies(
            default, out.shape
        )

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
            acc = self.mma_accumulator(dot) if dot is not None else None
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
        for k, i in enumerate(inits):
            if carried[k] is not None:
                self.carry_converted(op, k, i)

    def carry_converted(self, op: Operation, k: int, i: int) -> None:
        """Carry value ``k`` of loop ``op`` in the layout its body converts it to, when every
        use of the iteration argument is a conversion to one layout L and the yielded value
        is a conversion from L (attention's running max and sum, laid out like the MMA
        result they meet): the conversions in the body go away, the initial value is
        converted once before the loop instead, and the result leaves in L."""
        body = op.regions[0].blocks[0]
        arg, term = body.args[k + 1], body.terminator
        uses = [u for u, _ in arg.uses]
        if not uses or any(u.name != "nv_tileas.convert_layout" for u in uses):
            return
        target = self.layout[uses[0].results[0]]
        if any(self.layout[u.results[0]] != target for u in uses):
            return
        y = term.operands[k] if term is not None and k < len(term.operands) else None
        conv = y.op if isinstance(y, OpResult) else None
        if conv is None or conv.name != "nv_tileas.convert_layout" or y.num_uses != 1:
            return
        src = conv.operands[0]
        if self.layout.get(src) != target:
            return
        for u in uses:
            u.results[0].replace_all_uses_with(arg)
            u.erase()
            self.converts -= 1
        term.set_operand(k, src)
        conv.erase()
        self.converts -= 1
        self.layout[arg] = target
        self.layout[op.results[k]] = target
        self.require(op, i, target)

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


def assign_layouts(
    root: Operation, num_warps: int = 0, options: Optional[LayoutOptions] = None
) -> list[LayoutAssigner]:
    """Assign layouts, and record the stage's decisions (runtime/layouts/decisions.py), in every
    ``nv_tileaa.func`` under ``root``; returns one assigner each."""
    options = options or LayoutOptions(num_warps)
    out = []
    for op in list(root.walk()):
        if op.name == "nv_tileaa.func":
            a = LayoutAssigner(op, num_warps or options.num_warps or default_num_warps(op), options)
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
    options={
        "num-warps": (int, 0),
        "wgmma": (parse_bool, None),  # None: on (LayoutOptions)
        "cp-async": (parse_bool, None),
        "pipeline": (parse_bool, None),
        "num-stages": (int, 0),
        "tcgen05": (parse_bool, None),  # None: on (LayoutOptions)
    },
    summary="assign nv_tileas layouts to the tile values of nv_tileaa functions and record the "
    "layout stage's decisions (CTA size, vector widths, MMA family, cp.async staging, "
    "pipelining) as nv_tileas.* attributes",
)
def _pass(op: Operation, options: dict) -> None:
    assign_layouts(
        op,
        options=LayoutOptions(
            options.get("num-warps", 0),
            options.get("wgmma"),
            options.get("cp-async"),
            options.get("pipeline"),
            options.get("num-stages", 0),
            options.get("tcgen05"),
        ),
    )


def _loop_init_loaded_whole(v: Value, layout: DistributedLayout) -> bool:
    """Whether tile ``v`` (a load) reaches a loop's initial value through single-use
    elementwise ops of its shape with no other tile operand (C as the initial accumulator, cast or not), and ``layout`` (an
    MMA accumulator's) reads whole 32-byte sectors a warp (a quad's two-element runs of an
    ``mma.sync`` / wgmma accumulator: 4 threads x 8 bytes of f32): loaded in that layout, C
    needs no exchange through shared memory and its scratch buffer (a 128 x 128 f32 C took 64
    KB beside the async path's stages; docs/pipelines.md section 34)."""
    from tilegen.runtime.layouts.access import element_bytes

    if not isinstance(layout, BlockedLayout) or v.type.rank != 2:
        return False
    inner = layout.order[0]
    run = layout.size_per_thread[inner] * element_bytes(v.type.element)
    if min(run, 16) * layout.threads_per_warp[inner] < 32 or run < 8:
        return False
    shape = v.type.shape
    while v.num_uses == 1:
        (user,) = v.users
        if user.name == "scf.for":
            return any(o is v for o in user.operands[3:])
        if len(user.results) != 1 or user.regions or not _is_tile(user.results[0].type):
            return False
        if user.results[0].type.shape != shape:
            return False
        if not (U.has_trait(user, "Elementwise") or user.dialect in ("arith", "math")):
            return False
        if any(o is not v and _is_tile(o.type) for o in user.operands):
            return False  # (casts and scalings of C only: other tiles keep their layouts)
        v = user.results[0]
    return False
