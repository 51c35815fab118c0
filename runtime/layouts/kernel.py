"""Kernel-level facts the layout stage reads from attributes the conversion carried over:
``nv_tileaa.kernel_spec`` entries, enclosing integer attributes, the CTA size and stage count
asked for (``num_warps`` / ``tt.num_warps``, ``num_stages`` / ``tt.num_stages``)."""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.attributes import DictAttr, IntegerAttr
from tilegen.runtime.ir import Operation
from tilegen.runtime.types import NvPointerType, PointerType

DEFAULT_NUM_WARPS = 4
#: K-loop stages of today's (cp.async) path where the kernel names none: as many as fit, up to
#: 4 (tileiras 13.5's sm_80 GEMMs at 128 x 64 x 64 and 128 x 128 x 32 take 106,496 B: 4)
DEFAULT_NUM_STAGES = 4


def kernel_spec_int(func: Operation, key: str) -> Optional[int]:
    """Integer ``key`` of the function's folded ``nv_tileaa.kernel_spec`` (None if absent)."""
    spec = func.attributes.get("nv_tileaa.kernel_spec")
    if isinstance(spec, DictAttr):
        for k, v in spec.items:
            if k == key and isinstance(v, IntegerAttr):
                return v.value
    return None


#: on a kernel whose warp-specialised consumers cannot hold their accumulators within the
#: ``occupancy`` hint's register share even after the producer gives its registers back: the
#: hint's ``.maxnreg`` is not emitted (docs/pipelines.md section 21)
OCCUPANCY_CAP_DROPPED = "nv_tileas.occupancy_cap_dropped"

#: on a kernel whose tile block's rows are divided between the two CTAs of a cluster
#: (passes/pair_rows.py): the rows each CTA computes; codegen launches it as a cluster
PAIR_ROWS_ATTR = "nv_tileas.pair_rows"
#: the op that reads a CTA's rank in its cluster (spec/ops/nv_tileas/cluster.yaml)
CLUSTER_RANK_OP = "nv_tileas.cluster_cta_rank"


#: follows a ``.maxnreg`` that only the ``occupancy`` hint asked for (codegen/emit.py): where
#: ptxas cannot fit an instruction under it (C7602), the driver assembles the kernel without it,
#: as tileiras does (runtime/driver._stage_ptxas, runtime/ptxas.drop_occupancy_caps)
OCCUPANCY_CAP_MARK = "// occupancy hint"


def register_cap(func: Operation, threads: int, honor_dropped: bool = True) -> Optional[int]:
    """The ``.maxnreg`` a kernel of ``threads`` gets (seed 002): ``nvvm.maxnreg``, else from the
    ``occupancy`` hint (the 64K-register file shared by ``occupancy`` CTAs, as tileiras derives
    it; not where the async stage marked :data:`OCCUPANCY_CAP_DROPPED`), else None."""
    maxnreg = func.attributes.get("nvvm.maxnreg")
    if isinstance(maxnreg, IntegerAttr):
        return maxnreg.value
    if honor_dropped and OCCUPANCY_CAP_DROPPED in func.attributes:
        return None
    occ = kernel_spec_int(func, "occupancy")
    if occ and occ > 0:
        regs = min(255, (65536 // (threads * occ)) // 8 * 8)
        if regs < 255:
            return regs
    return None


def register_budget(func: Operation, threads: int) -> int:
    """Registers a thread of the kernel may use: its cap, else what one CTA of ``threads``
    leaves in the 64K-register file (at most 255)."""
    cap = register_cap(func, threads)
    return cap if cap is not None else min(255, 65536 // threads // 8 * 8)


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
    """The CTA size the kernel asks for: cuTile's ``num_worker_warps_per_cta`` hint (the warps
    that compute: a TMA producer warp group, where the async path adds one, comes on top, as in
    tileiras), else ``kernel_spec.num_warps``, else ``tt.num_warps``, else
    :data:`DEFAULT_NUM_WARPS` (seed 002's default: 128 threads)."""
    for n in (
        kernel_spec_int(func, "num_worker_warps_per_cta"),
        kernel_spec_int(func, "num_warps"),
        enclosing_int_attr(func, "tt.num_warps"),
    ):
        if n is not None:
            return n
    return DEFAULT_NUM_WARPS


def kernel_num_stages(func: Operation) -> int:
    """The K-loop stage count the kernel asks for: ``kernel_spec.num_stages``, else
    ``tt.num_stages``, else :data:`DEFAULT_NUM_STAGES` (1 means no pipelining). The emitter
    takes fewer where they do not fit in shared memory (codegen/control._pipeline_plan)."""
    for n in (kernel_spec_int(func, "num_stages"), enclosing_int_attr(func, "tt.num_stages")):
        if n is not None:
            return n
    return DEFAULT_NUM_STAGES


def target_sm(op: Operation) -> Optional[int]:
    """The compute capability the module around ``op`` was converted for (None if unknown)."""
    return enclosing_int_attr(op, "nv_tileaa.compute_capability")


#: The CTA size :func:`default_num_warps` gives a kernel that does not ask for one, where its
#: K loop has 128-row dots the async path does not take (docs/layouts.md "CTA size").
WIDE_NUM_WARPS = 8


def default_num_warps(func: Operation) -> int:
    """The CTA size for the layout stage: what the kernel asks for (:func:`kernel_num_warps`;
    the conversion marks ``nv_tileaa.num_warps_default`` where the producer gave none), else 8
    warps:

    * where a top-level K loop's one dot has a tile of 256 rows, or of 128 rows by over 128
      columns, on every target: 4 warps would hold over 128 accumulator registers a thread
      (tileiras keeps 4 warps on sm_80 there and spills a kilobyte); on sm_90+ subject to the
      async path's CTA pairs below;
    * on sm_90+ where a top-level loop holds a dot of 128-row tiles (M a multiple of 128) that
      is not the async path's shape (one dot accumulating into the loop-carried value):
      attention's two dots, a block-scaled GEMM's ``acc + dot(a, b, 0) * scale``. Two warp
      groups then take 64 rows each (tileiras's block-scaled GEMM has two consumer groups too);
      one would hold twice the registers (attention forward 128x64 tiles: 255 registers and
      spills on 4 warps, 168 and none on 8).

    Else :data:`DEFAULT_NUM_WARPS`."""
    if "nv_tileaa.num_warps_default" not in func.attributes:  # the producer's choice
        return kernel_num_warps(func)
    if not func.regions or not func.regions[0].blocks:
        return DEFAULT_NUM_WARPS
    footprint = _footprint_num_warps(func)
    if footprint is not None:
        return footprint
    sm = target_sm(func)
    if sm is None:
        return DEFAULT_NUM_WARPS
    for loop in func.regions[0].blocks[0].ops:
        if loop.name != "scf.for":
            continue
        dots = [o for o in loop.walk() if o.name == "nv_tileaa.dot"]
        body = loop.regions[0].blocks[0]
        if len(dots) == 1 and _fma_dot(dots[0]) and _result_registers(dots, 4) >= 128:
            return WIDE_NUM_WARPS  # f32 x f32: results and the fma dot's vectors on 4 warps
        if sm < 90:  # mma.sync: a loop's results of over 128 registers a thread on 4 warps
            if len(dots) == 1 and dots[0].operands[2] in body.args:
                if _tall_dot(dots[0]) or _wide_n_dot(dots[0]):
                    return WIDE_NUM_WARPS
            elif any(_wide_dot(d) for d in dots) and _result_registers(dots, 4) > 128:
                return WIDE_NUM_WARPS
            continue
        if len(dots) == 1 and dots[0].operands[2] in body.args:
            # the async path's K loop: its consumer warps stay the kernel's 4 (a CTA pair's
            # too: 128 rows per CTA), unless one warp group would hold 256 rows of
            # accumulators; two then take 128 each (2 x 64 registers a thread, N 128)
            m, n = dots[0].operands[0].type.shape[0], dots[0].operands[1].type.shape[-1]
            if (_tall_dot(dots[0]) or _wide_n_dot(dots[0])) and (
                not _may_pair(func, sm, dots[0], loop)
                or (n > 128 and (m > 128 or not _half_stored(func, sm, dots[0])))
            ):  # (a pair of N 256: each CTA's 128 rows in two column halves, section 30; a
                # pair's 64 rows a CTA stay on 4 warps, half a row of N 256 a thread)
                return WIDE_NUM_WARPS
            continue
        if (
            any(_wide_dot(d) for d in dots)
            and not _one_group_in_tmem(func, sm, dots)
            and not _one_group_in_registers(func, sm, dots)
        ):
            return WIDE_NUM_WARPS
    return DEFAULT_NUM_WARPS


def _one_group_in_tmem(func: Operation, sm: int, dots: list) -> bool:
    """Whether a loop of several dots (attention) keeps one warp group under an ``occupancy``
    hint of 2 or more on a tcgen05 target, as tileiras does (docs/pipelines.md section 27):
    every dot of 128 rows and at most 128 columns with 16-bit operands, a thread then holds one
    row of the first dot's result, the accumulator stays in tensor memory and P goes there too;
    two warp groups (384 threads at 168 registers) would leave no room for a second CTA. (Wider
    outputs keep two groups: a thread would read 256 columns of O back after the loop.)"""
    from tilegen.runtime.layouts.mma_choice import TCGEN05_SMS
    from tilegen.runtime.options import current

    occ = kernel_spec_int(func, "occupancy")
    if sm not in TCGEN05_SMS or not current().use_tcgen05 or not occ or occ < 2 or len(dots) < 2:
        return False
    for d in dots:
        a, b = d.operands[0].type, d.operands[1].type
        shape_a, shape_b = getattr(a, "shape", ()), getattr(b, "shape", ())
        if len(shape_a) != 2 or shape_a[0] != 128 or len(shape_b) != 2 or shape_b[1] > 128:
            return False
        if getattr(getattr(a, "element", None), "name", "") not in ("f16", "bf16"):
            return False
    return True


#: Registers a consumer thread keeps beside a loop's dot results (softmax statistics, P,
#: addresses) in :func:`_one_group_in_registers`'s estimate.
ONE_GROUP_SLACK = 64


def _fma_dot(dot: Operation) -> bool:
    """An f32 x f32 dot: no tensor-core form (``fma_dot.fma_dot``)."""
    element = getattr(getattr(dot.operands[0].type, "element", None), "name", "")
    return element == "f32"


def _result_registers(dots: list, warps: int) -> int:
    """32-bit registers a thread holds of ``dots``' 2-d results on ``warps`` warps."""
    total = 0
    for d in dots:
        shape = getattr(d.results[0].type, "shape", ())
        if len(shape) == 2:
            total += shape[0] * shape[1] // (32 * warps)
    return total


def _one_group_in_registers(func: Operation, sm: int, dots: list) -> bool:
    """Whether a loop of several dots (attention) keeps one warp group on sm_90 under an
    ``occupancy`` hint of 2 or more: every dot of 128 rows with 16-bit operands, and the dots'
    results on 4 warps (one row block of 128 a thread's share) plus :data:`ONE_GROUP_SLACK`
    within what a consumer thread gets when the hint's CTAs of 256 threads share the SM's
    registers (the producer warp group at 32). That is tileiras's shape (256 threads at 128
    registers; TileGym's 128 x 64 d 64 causal tile): two warp groups would get 104 registers
    each and spill. Where the dots need more (d 128), two groups keep one CTA an SM."""
    occ = kernel_spec_int(func, "occupancy")
    if sm != 90 or not occ or occ < 2 or len(dots) < 2:
        return False
    need = ONE_GROUP_SLACK
    for d in dots:
        a, b = d.operands[0].type, d.operands[1].type
        shape_a, shape_b = getattr(a, "shape", ()), getattr(b, "shape", ())
        if len(shape_a) != 2 or shape_a[0] != 128 or len(shape_b) != 2:
            return False
        if getattr(getattr(a, "element", None), "name", "") not in ("f16", "bf16"):
            return False
        need += 128 * shape_b[1] // 128
    budget = (65536 // (occ * 256) * 256 - 32 * 128) // 128 // 8 * 8
    return need <= budget


#: Registers a thread may spend on the kernel's largest tile before :func:`default_num_warps`
#: widens a dot-free CTA, and the widest CTA it goes to (512 threads).
TILE_REGISTERS_PER_THREAD = 64
MAX_FOOTPRINT_NUM_WARPS = 16


def _footprint_num_warps(func: Operation) -> Optional[int]:
    """For a kernel without dots whose largest tile would take more than
    :data:`TILE_REGISTERS_PER_THREAD` 32-bit registers a thread on 4 warps: the fewest warps (8
    or 16) that bring it within that, so a whole-row tile (TileGym's silu_and_mul at hidden
    11008, a 16384-element tile; an 8 x 4096 row sum) is held without spilling. tileiras keeps
    128 threads there and streams the elementwise chain through the tile; tilegen holds every
    tile value whole, so it spreads the tile over more threads instead. None otherwise
    (kernels with dots keep the dot rules below)."""
    largest = 0
    for op in func.walk():
        if op.name == "nv_tileaa.dot":
            return None
        for r in op.results:
            t = r.type
            shape = getattr(t, "shape", None)
            if not shape or any(not isinstance(d, int) or d <= 0 for d in shape):
                continue
            n = 1
            for d in shape:
                n *= d
            element = getattr(t, "element", None)
            bits = getattr(element, "width", None) or (
                64 if isinstance(element, (PointerType, NvPointerType)) else 32
            )
            largest = max(largest, n * max(1, bits // 32))
    warps = DEFAULT_NUM_WARPS
    while largest > TILE_REGISTERS_PER_THREAD * 32 * warps and warps < MAX_FOOTPRINT_NUM_WARPS:
        warps *= 2
    return warps if warps != DEFAULT_NUM_WARPS else None


def _half_stored(func: Operation, sm: int, dot: Operation) -> bool:
    """Whether a CTA's half of ``dot``'s tile (M / 2 rows, 4 bytes an element at most) fits in
    the shared memory the ``occupancy`` hint leaves a CTA, beside two stages' worth of slack:
    the pair stores its rows by TMA through the idle ring, which can grow that far. (Where it
    cannot, the pair is refused after the layouts are fixed, and 4 warps would hold the whole
    tile on today's path.)"""
    from tilegen.runtime.targets import occupancy_shared

    m, n = dot.operands[0].type.shape[0], dot.operands[1].type.shape[-1]
    return m // 2 * n * 4 + 16 * 1024 <= occupancy_shared(sm, kernel_spec_int(func, "occupancy"))


def _may_pair(func: Operation, sm: int, dot: Operation, loop: Operation) -> bool:
    """Whether the kernel asks for a CTA pair where the async path builds them (sm_90 and
    sm_100 with ``CompileOptions.cta_pair``: docs/pipelines.md sections 18-19) for a dot it can
    pair: N at most 128 (each CTA's 128 rows x N on one warp group), or 256 (each CTA's 128
    rows on two warp groups: column halves on sm_100, 64 rows each on sm_90; docs/pipelines.md
    section 30), in
    a kernel of the pair's form (``async_pair.pair_reason``'s conditions on the IR's structure:
    a uniform initial value or C as ``async_forms.init_chain`` loads it, elementwise ops from
    the loop to one TMA store, nothing else writing memory). A hinted kernel the pair then
    refuses (a 3-d store of more than a batch's unit dim) keeps two warp groups on one CTA,
    not one group holding 256 rows of accumulators."""
    from tilegen.runtime.options import current

    m = getattr(dot.operands[0].type, "shape", (0, 0))[0]
    n = getattr(dot.operands[1].type, "shape", (0, 0))[-1]
    element = getattr(getattr(dot.operands[0].type, "element", None), "name", "")
    return (
        kernel_spec_int(func, "num_cta_in_cga") == 2
        and element not in ("f32", "f64")  # (no tensor-core form: the fma dot, no pair)
        and sm in (90, 100)
        and one_cta_reason(sm, m, n, current().cta_pair) is None
        and (n <= 128 or n == 256)
        and _pair_form(func, loop, dot, sm)
    )


#: sm_90: the largest M x N one CTA's two consumer warp groups hold (128 f32 a thread)
ONE_CTA_TILE = 256 * 128


def one_cta_reason(sm: int, m: int, n: int, cta_pair: Optional[bool]) -> Optional[str]:
    """Why a GEMM tile whose kernel asks for a CTA pair (``num_cta_in_cga`` 2) runs on one CTA
    instead, or None. ``cta_pair`` is :class:`CompileOptions`' field: False, never a pair;
    True, a pair wherever the form allows. None: on sm_90, a pair only where one CTA cannot
    hold the M x N accumulator (more than 128 f32 a thread of two consumer warp groups: the
    256 x 256 tile). Measured on an H200 (docs/pipelines.md section 46), one CTA with two
    consumer warp groups beat the pair at 256 x 128 (692 against 616 TFLOP/s at 4096^3), 128
    x 128, 128 x 256 and from C; the pair's B multicast halves B's traffic but couples the two
    CTAs at every stage."""
    if cta_pair is False:
        return "cta_pair is off (--no-cta-pair)"
    if cta_pair is None and sm == 90 and m * n <= ONE_CTA_TILE:
        return (
            f"on sm_90 one CTA holds the {m} x {n} accumulator in two consumer warp groups, "
            "faster than a pair on an H200 (--cta-pair takes the pair)"
        )
    return None


#: op-name suffixes of the ops that write memory (both CTAs of a pair would run them)
_WRITES = ("store", "atomic", "scatter", "print", "assert")


def _pair_form(func: Operation, loop: Operation, dot: Operation, sm: int = 0) -> bool:
    """The CTA pair's conditions on the IR's structure (``async_pair.pair_reason`` checks them
    again once the layouts exist): the dot accumulates into the loop's value from a uniform
    initial tile (or from C as ``async_forms.init_chain`` loads it: each CTA loads its own
    rows of it, into its fragment on sm_90 and its TMEM rows on sm_100), its operands reach it
    from loads TMA can copy (``tma_rules.tma_describable``: 16-byte aligned strides),
    unconverted but on sm_90 (whose consumers round an f32 -> tf32 operand in their own CTA's
    stage), and the kernel's only memory write is one 2-d ``tiled_store`` (or a batch's
    ``(1, M, N)``; both: docs/pipelines.md section 56) after the loop of a value computed
    from the loop's result by elementwise ops with uniform operands
    (``async_forms.fragment_chain``: no bias row loaded after the loop, no second store)."""
    from tilegen.runtime.ir import BlockArgument, OpResult
    from tilegen.runtime.layouts.async_forms import (
        fragment_chain,
        init_chain,
        operand_load,
        uniform_tile,
    )
    from tilegen.runtime.layouts.tma_rules import tma_describable

    def _loaded(v) -> bool:
        return isinstance(v, OpResult) and v.op.name == "nv_tileaa.tiled_load"

    if not isinstance(dot.operands[2], BlockArgument) or len(loop.operands) < 4:
        return False
    if not uniform_tile(loop.operands[3]) and not init_chain(loop):
        return False
    converted = [
        isinstance(v, OpResult) and v.op.name == "nv_tileaa.fp_to_fp" for v in dot.operands[:2]
    ]
    if any(converted) and sm != 90:
        return False
    for v, c in zip(dot.operands[:2], converted):  # staged by TMA (else today's path)
        v = v.op.operands[0] if c else v
        load = operand_load(v)[0] if not _loaded(v) else v.op
        if load is None or load.name != "nv_tileaa.tiled_load" or tma_describable(load):
            return False
    writes = [o for o in func.walk() if any(w in o.name.split(".")[-1] for w in _WRITES)]
    if len(writes) != 1 or writes[0].name != "nv_tileaa.tiled_store":
        return False
    store = writes[0]
    ops = func.regions[0].blocks[0].ops
    if store.parent is not loop.parent or ops.index(store) < ops.index(loop):
        return False
    value = store.opdef.operand_group(store, "value")[0]
    shape = tuple(getattr(value.type, "shape", ()))
    if len(shape) < 2 or any(n != 1 for n in shape[:-2]):  # (2-d, or a batch's (1, M, N))
        return False
    return fragment_chain(loop, store, through_conversion=True) is not None


def _tall_dot(dot: Operation) -> bool:
    """A 2-d dot of 256 or more rows (a multiple of 128), the async path's GEMM form with two
    consumer warp groups."""
    shape = getattr(dot.operands[0].type, "shape", ())
    return len(shape) == 2 and shape[0] >= 256 and shape[0] % 128 == 0


def _wide_n_dot(dot: Operation) -> bool:
    """A 2-d dot of 128 rows whose accumulator would take one warp group more than 128
    registers a thread (N over 128: TileGym's 128 x 256 GEMM tile); two warp groups of 64 rows
    hold half each on wgmma (sm_90; tileiras keeps one group there, at 255 registers and 1.8 KB
    of stack), of the columns of the 128 TMEM rows on tcgen05 (sm_100; tileiras: one group at
    255 registers, 8-72 bytes of stack), of the columns on mma.sync (today's path)."""
    a, b = dot.operands[0].type, dot.operands[1].type
    shape_a, shape_b = getattr(a, "shape", ()), getattr(b, "shape", ())
    return (
        len(shape_a) == 2
        and len(shape_b) == 2
        and shape_a[0] == 128
        and shape_b[1] > 128
        and shape_b[1] % 64 == 0
    )


def _wide_dot(dot: Operation) -> bool:
    a = dot.operands[0].type
    shape = getattr(a, "shape", ())
    element = getattr(getattr(a, "element", None), "name", "")
    return len(shape) == 2 and shape[0] % 128 == 0 and element not in ("f64", "f32")
