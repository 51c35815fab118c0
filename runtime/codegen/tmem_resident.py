"""Loop-carried tcgen05 accumulators kept in tensor memory (docs/pipelines.md section 25).

A 256-row attention on sm_100a (8 warps, a row per thread) would hold both its 128-column
``Q K^T`` and its 128-column output accumulator O in registers: 256 a thread. As tileiras does,
O stays in tensor memory across the K loop instead:

* **Which.** A loop keeps iteration argument ``acc`` in tensor memory when it yields
  ``dot(A, B, C)`` (a tcgen05 dot) for it, the dot's result has no other use, and C is ``acc``
  itself (a plain accumulation: always) or ``mulf(acc, s)`` (the online softmax's rescale:
  where the loop's tcgen05 dots' results take more than :data:`RESIDENT_ABOVE` registers a
  thread), each used once (:func:`plan_of`).
  A loop whose init is another resident accumulator's loop result (a chain, docs/pipelines.md
  section 23) shares its columns. The async GEMM and scaled forms keep their own.
* **Columns.** The kernel's allocation (``tcgen05_dot.tensor_memory``) holds the scratch of
  the dots whose D is not resident (the widest, both 128-row blocks at M 256) and then each
  resident accumulator's columns; a plan past 512 columns keeps every accumulator in
  registers.
* **Code.** The init is stored (``tcgen05.st``) before the loop; ``mulf(acc, s)`` loads, scales
  and stores the accumulator 32 columns at a time (:func:`rescale`), skipped by a warp whose
  scales are all 1.0 (no row's maximum moved); the dot accumulates into
  the columns (enable-input-d on every K step) and reads nothing back; the yield moves nothing.
  After the loop the result is read into registers once (:func:`materialize`), unless it only
  starts the next loop of a chain. A 256-row dot's A, when it comes from registers in the
  accumulator's row layout (P), is stored in the scratch columns, which hold no live value by
  then (each warp its own lanes and block), and read by ``tcgen05.mma`` from tensor memory
  (``tcgen05_dot``): no shared memory.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime.codegen.core import Emitter, elem_key
from tilegen.runtime.codegen.dist import Dist
from tilegen.runtime.layouts.decisions import mma_family
from tilegen.runtime.layouts.mma_choice import TCGEN05, tcgen05_accumulator_layout
from tilegen.runtime.records import dataclass

#: tensor memory's columns (sm_100: 128 lanes x 512 columns of 32 bits)
TMEM_COLUMNS = 512
#: columns one ``tcgen05.ld`` / ``tcgen05.st`` moves per thread
CHUNK = 32
#: a loop keeps its accumulators in tensor memory when its tcgen05 dots' results take more
#: than this many registers a thread (256-row attention: 128 + 128; at 128 rows with 8 warps
#: and head dim 128, 64 + 64 stay in registers)
RESIDENT_ABOVE = 128


@dataclass(frozen=True)
class TmemTile:
    """A tile held in tensor memory: columns ``col`` .. of the kernel's allocation, each thread
    its rows' ``part`` columns, as a tcgen05 dot's result is read: ``tcgen05.ld.32x32b``
    (M 128 and 256), or with ``split`` (M 64) ``16x32bx2``, threads 16-31 ``split`` columns
    after threads 0-15; the warps' column parts ``stride`` apart (0: ``part``)."""

    col: int
    part: int
    dl: Dist
    split: int = 0
    stride: int = 0
    #: the register class of its values (``b32``: an i32 accumulator)
    cls: str = "f32"

    @property
    def warp_stride(self) -> int:
        return self.stride or self.part


@dataclass(frozen=True)
class TmemPlan:
    """The kernel's resident accumulators: (loop, iteration-argument index) -> first column;
    the ``mulf`` rescales that keep them there -> the operand index of the accumulator; the
    dots' scratch columns (from 0) and the columns to allocate."""

    residents: dict
    rescales: dict
    scratch: int
    columns: int
    #: the first column of the region where a dot's A from registers (P) is kept, and the
    #: dots that may use it (:func:`p_source`); None: no region
    p_col: Optional[int] = None
    p_dots: frozenset = frozenset()


def _columns(n: int) -> int:
    c = 32
    while c < n:
        c *= 2
    return c


def _is_tcgen05(op) -> bool:
    return op is not None and op.name == "nv_tileaa.dot" and mma_family(op) == TCGEN05


def _blocks_n(dot) -> tuple:
    """(128-row blocks, N) of a tcgen05 dot."""
    m, n = dot.operands[2].type.shape
    return max(1, m // 128), n


def dot_registers(loop, threads: int) -> int:
    """Registers a thread holds for the results of ``loop``'s tcgen05 dots (its own body's)."""
    return sum(
        o.results[0].type.shape[0] * o.results[0].type.shape[1] // threads
        for o in loop.regions[0].blocks[0].ops
        if _is_tcgen05(o)
    )


def resident_dot(loop, j: int, threads: int) -> Optional[tuple]:
    """(the dot, the rescale ``mulf`` or None) when iteration argument ``j`` of ``loop`` can
    stay in tensor memory (module docstring), else None."""
    body = loop.regions[0].blocks[0]
    arg = body.args[1 + j]
    d = getattr(body.ops[-1].operands[j], "op", None)
    if not _is_tcgen05(d) or d.parent is not body or d.results[0].num_uses != 1:
        return None
    if arg.num_uses != 1:
        return None
    c = d.operands[2]
    if c is arg:  # a plain accumulation (a GEMM's K loop): nothing to read back each step
        return d, None
    if dot_registers(loop, threads) <= RESIDENT_ABOVE:  # (a rescale costs a load and store)
        return None
    m = getattr(c, "op", None)
    if m is None or m.name != "nv_tileaa.mulf" or m.parent is not body or c.num_uses != 1:
        return None
    if "flush_to_zero" in m.attributes or list(m.operands).count(arg) != 1:
        return None
    rm = m.attributes.get("rounding_mode")
    if rm is not None and str(getattr(rm, "value", rm)) not in ("nearest_even", "0"):
        return None
    return d, m


def plan_of(em: Emitter) -> TmemPlan:
    """The kernel's :class:`TmemPlan` (computed once)."""
    from tilegen.runtime.codegen.async_loop import ASYNC_ATTR, ASYNC_GENERAL_ATTR

    p = getattr(em, "tmem_plan", None)
    if p is not None:
        return p
    dots, loops, own = [], [], set()
    for o in em.func.walk():
        if _is_tcgen05(o) and o not in own:
            dots.append(o)
        elif o.name != "scf.for":
            continue
        elif ASYNC_ATTR not in o.attributes or ASYNC_GENERAL_ATTR in o.attributes:
            loops.append(o)
        else:  # the async GEMM and scaled forms: their dots and accumulators are their own
            own.update(x for x in o.walk() if _is_tcgen05(x))
    residents, rescales, kept, widths = {}, {}, set(), 0
    for loop in loops:
        for j in range(len(loop.results)):
            found = resident_dot(loop, j, 32 * em.num_warps)
            if found is None or not _row_layout(em, loop, j):
                continue
            d, m = found
            init = loop.operands[3 + j]
            src = getattr(init, "op", None)
            at = None
            if src is not None and src.name == "scf.for":
                at = residents.get((src, list(src.results).index(init)))
            if at is None:
                blocks, n = _blocks_n(d)
                at, widths = widths, widths + blocks * n
            residents[(loop, j)] = at
            kept.add(d)
            if m is not None:
                rescales[m] = list(m.operands).index(loop.regions[0].blocks[0].args[1 + j])
    # the other dots' D (and P, kept in tensor memory by a resident dot) share the scratch
    scratch = max([b * n for b, n in map(_blocks_n, (d for d in dots if d not in kept))] + [0])
    scratch = _columns(scratch) if scratch else 0
    if residents and _columns(scratch + widths) > TMEM_COLUMNS:
        residents, rescales, kept, widths = {}, {}, set(), 0
        scratch = _columns(max([b * n for b, n in map(_blocks_n, dots)] + [32]))
    # P of the other dots: its own region after them (a 256-row dot into a resident D keeps
    # its P in the scratch instead), if it fits
    p_dots = [d for d in dots if _p_candidate(em, d) and not (d in kept and _blocks_n(d)[0] == 2)]
    p_need = max([_blocks_n(d)[0] * d.operands[0].type.shape[1] // 2 for d in p_dots] + [0])
    p_col = None
    if p_need and _columns(scratch + widths + p_need) <= TMEM_COLUMNS:
        p_col, widths = scratch + widths, widths + p_need
    else:
        p_dots = []
    em.tmem_plan = TmemPlan(
        {k: scratch + v for k, v in residents.items()},
        rescales,
        scratch,
        _columns(max(32, scratch + widths)),
        p_col,
        frozenset(p_dots),
    )
    return em.tmem_plan


def _p_candidate(em: Emitter, dot) -> bool:
    """Whether ``dot``'s A may go to tensor memory when it comes from registers: 16-bit, in
    the accumulator's row layout (P, after a softmax in ``Q K^T``'s layout), M 128 or 256,
    and not a load (a staged A is read from shared memory)."""
    a = dot.operands[0]
    m, k = a.type.shape
    if m not in (128, 256) or getattr(getattr(a, "op", None), "name", "").endswith("load"):
        return False
    from tilegen.runtime.codegen.core import elem_key

    lay = getattr(a.type, "encoding", None)
    return elem_key(a.type) in ("f16", "bf16") and lay == tcgen05_accumulator_layout(
        em.num_warps, k, m
    )


def _row_layout(em: Emitter, loop, j: int) -> bool:
    """Whether ``loop``'s result ``j`` is in the tcgen05 accumulator's row layout."""
    t = loop.results[j].type
    m, n = t.shape
    return em.dist_of(loop, t).layout == tcgen05_accumulator_layout(em.num_warps, n, m)


def slot(em: Emitter, loop, j: int) -> Optional[TmemTile]:
    """The tensor-memory slot of ``loop``'s iteration argument ``j``, or None (registers)."""
    if em.sm not in (100, 103, 110):
        return None
    col = plan_of(em).residents.get((loop, j))
    if col is None:
        return None
    t = loop.results[j].type
    m, n = t.shape
    cls = "b32" if elem_key(t) == "i32" else "f32"
    if m == 64:  # rows in lanes 0-15 of each quarter, two threads a row (16x32bx2)
        h = em.num_warps // 4
        part = n // (2 * h)
        return TmemTile(col, part, em.dist_of(loop, t), part, n // h, cls)
    part = n // max(1, em.num_warps // 4 // (m // 128))
    return TmemTile(col, part, em.dist_of(loop, t), cls=cls)


def lanes(em: Emitter, part: int) -> str:
    """The thread's TMEM lane and column-part offset (hoisted): lane 32 (w % 4) in bits 16..,
    column (w / 4) ``part``."""
    _, _, warp = em.tid()
    key = ("tc-rows", part)
    if key not in em._smem_refs:
        with em.hoisted():
            q, h = em.new("b32"), em.new("b32")
            em.ins(f"and.b32 {q}, {warp}, 3")
            em.ins(f"shr.u32 {h}, {warp}, 2")
            addr = em.new("b32")
            em.ins(f"shl.b32 {addr}, {q}, 21")  # (32 (w % 4)) << 16: the lane field
            em.ins(f"mad.lo.s32 {addr}, {h}, {part}, {addr}")
            em._smem_refs[key] = addr
    return em._smem_refs[key]


def by_column(dl: Dist, part: int) -> dict:
    """Column in the thread's part -> the layout's registers holding it."""
    out: dict = {}
    for k in range(dl.nregs):
        out.setdefault(dl.raw[k][1] % part, []).append(k)
    return out


def _address(em: Emitter, part: int, col: int, c0: int) -> str:
    """The TMEM address of the thread's column ``c0`` in the tile at ``col`` (column parts
    ``part`` apart)."""
    src = em.new("b32")
    em.ins(f"add.s32 {src}, {lanes(em, part)}, {em.tmem.taddr}")
    if col + c0:
        em.ins(f"add.s32 {src}, {src}, {col + c0}")
    return src


def _move(em: Emitter, part: int, col: int, c0: int, regs: list, split: int, load: bool):
    """One ``tcgen05.ld`` / ``tcgen05.st`` of ``regs`` at the thread's column ``c0`` of its
    part at ``col``: ``32x32b``, or with ``split`` (an M 64 tile's half offset) ``16x32bx2``."""
    src = _address(em, part, col, c0)
    shape = f"{'16x32bx2' if split else '32x32b'}.x{len(regs)}.b32"
    imm = f", {split}" if split else ""
    vec = "{" + ", ".join(regs) + "}"
    if load:
        em.ins(f"tcgen05.ld.sync.aligned.{shape} {vec}, [{src}]{imm}")
    else:
        em.ins(f"tcgen05.st.sync.aligned.{shape} [{src}]{imm}, {vec}")


def load_chunk(em: Emitter, part: int, col: int, c0: int, n: int, split: int = 0) -> list:
    """``n`` b32 registers: the thread's columns ``c0`` .. of its part at ``col``, loaded and
    waited for (``split``: the 16x32bx2 half offset of an M 64 tile)."""
    regs = [em.new("b32") for _ in range(n)]
    _move(em, part, col, c0, regs, split, True)
    em.ins("tcgen05.wait::ld.sync.aligned")
    return regs


def store_chunk(em: Emitter, part: int, col: int, c0: int, regs: list, split: int = 0) -> None:
    """Store b32 ``regs`` to the thread's columns ``c0`` .. of its part at ``col``."""
    _move(em, part, col, c0, regs, split, False)


def _tmem(em: Emitter):
    from tilegen.runtime.codegen.tcgen05_dot import tensor_memory

    return tensor_memory(em)


def store_packed(em: Emitter, dl: Dist, regs: list, part: int, stride: int, col: int = 0) -> None:
    """Write a 16-bit tile (registers ``regs`` of row layout ``dl``, ``part`` elements of a row
    a thread) two elements to a column (``tcgen05.mma``'s A from tensor memory: element k of
    a row in bits 16 (k % 2) of column k / 2) from column ``col``, warp w's part at column
    (w / 4) ``stride``; waited for."""
    _tmem(em)
    cols = by_column(dl, part)
    words = []
    for c in range(0, part, 2):
        w = em.new("b32")
        em.ins(f"mov.b32 {w}, {{{regs[cols[c][0]]}, {regs[cols[c + 1][0]]}}}")
        words.append(w)
    for c0 in range(0, len(words), CHUNK):
        store_chunk(em, stride, col, c0, words[c0 : c0 + CHUNK])
    em.ins("tcgen05.wait::st.sync.aligned")


def _b32(em: Emitter, x, cache: dict) -> str:
    """A b32 register holding ``x`` (a register of any 32-bit class, or an immediate)."""
    if x not in cache:
        r = em.new("b32")
        em.ins(f"mov.b32 {r}, {x}")
        cache[x] = r
    return cache[x]


def store(em: Emitter, tile: TmemTile, regs: list) -> None:
    """Write registers ``regs`` (``tile``'s layout) into its columns (a loop's init)."""
    _tmem(em)
    cols = by_column(tile.dl, tile.part)
    cache: dict = {}
    for c0 in range(0, tile.part, CHUNK):
        n = min(CHUNK, tile.part)
        words = [_b32(em, regs[cols[c0 + i][0]], cache) for i in range(n)]
        store_chunk(em, tile.warp_stride, tile.col, c0, words, tile.split)
    em.ins("tcgen05.wait::st.sync.aligned")


def materialize(em: Emitter, tile: TmemTile) -> list:
    """``tile`` read into registers of its layout (after its loop: every MMA into it was
    waited for)."""
    out = [None] * tile.dl.nregs
    for got in chunks(em, tile):
        for k, r in got.items():
            out[k] = r
    return out


def rescale(em: Emitter, op) -> bool:
    """``mulf(acc, s)`` of a resident accumulator: each 32-column chunk loaded, scaled and
    stored back in place; the result is the same columns. False (nothing emitted) when the
    accumulator is in registers after all (its loop's layout did not allow the slot)."""
    idx = plan_of(em).rescales[op]
    tile = em.values.get(op.operands[idx])
    if not isinstance(tile, TmemTile):
        return False
    s = em.tile(op, op.operands[1 - idx])
    skip = _unless_scaled(em, s)
    cols = by_column(tile.dl, tile.part)
    for c0 in range(0, tile.part, CHUNK):
        n = min(CHUNK, tile.part)
        regs = load_chunk(em, tile.warp_stride, tile.col, c0, n, tile.split)
        out = []
        for i, reg in enumerate(regs):
            k = cols[c0 + i][0]
            x, y = em.new("f32"), em.new("f32")
            em.ins(f"mov.b32 {x}, {reg}")
            em.ins(f"mul.rn.f32 {y}, {x}, {s[k]}")
            r = em.new("b32")
            em.ins(f"mov.b32 {r}, {y}")
            out.append(r)
        store_chunk(em, tile.warp_stride, tile.col, c0, out, tile.split)
    em.ins("tcgen05.wait::st.sync.aligned")
    if skip is not None:
        em.label(skip)
    em.set(op.results[0], tile)
    return True


#: the scale registers of a thread up to which a rescale is skipped where they are all 1.0
SKIP_SCALES = 8


def _unless_scaled(em: Emitter, s: list):
    """A branch around the rescale, taken by a warp none of whose scales differ from 1.0 (the
    online softmax's ``alpha`` where no row's maximum moved): ``x * 1.0`` is ``x``, so the
    load, multiply and store of the accumulator may be left out. Returns the label to put
    after the rescale, or None (immediates, or a thread with many rows)."""
    scales = list(dict.fromkeys(s))
    if len(scales) > SKIP_SCALES or not all(isinstance(x, str) and x[:1] == "%" for x in scales):
        return None
    moved = None
    for x in scales:  # unordered too: a NaN scale is applied
        q = em.new("pred")
        em.ins(f"setp.neu.f32 {q}, {x}, 0f3F800000")
        if moved is not None:
            r = em.new("pred")
            em.ins(f"or.pred {r}, {moved}, {q}")
            q = r
        moved = q
    any_moved = em.new("pred")
    em.ins(f"vote.sync.any.pred {any_moved}, {moved}, -1")
    skip = em.new_label("tmem_rescaled")
    em.ins(f"@!{any_moved} bra {skip}")
    return skip


def chunks(em: Emitter, tile: TmemTile):
    """``tile`` read ``CHUNK`` columns at a time: yields {register index of its layout:
    register} per chunk, each loaded and waited for when the one before it has been used (a
    store of a resident result, :class:`Epilogue`: never the whole tile in registers)."""
    _tmem(em)
    cols = by_column(tile.dl, tile.part)
    for c0 in range(0, tile.part, CHUNK):
        n = min(CHUNK, tile.part)
        got = {}
        for i, reg in enumerate(load_chunk(em, tile.warp_stride, tile.col, c0, n, tile.split)):
            for k in cols.get(c0 + i, ()):
                r = em.new(tile.cls)
                em.ins(f"mov.b32 {r}, {reg}")
                got[k] = r
        yield got


@dataclass(frozen=True)
class Epilogue:
    """A resident loop result on its way to its only store, run by the store a chunk of
    columns at a time (:func:`rounds`): the values from the result to the stored tile (a
    single-use chain of elementwise ops in the accumulator's layout,
    ``async_forms.fragment_chain``; just the result where it is stored as it is), and the row
    vectors broadcast beside it, which would hold a whole row of registers a thread (a bias):
    each is written to a shared array of its own where its broadcast stands and read back a
    chunk of columns at a time, as ``fragment_sides`` does for the async path. ``written``:
    broadcast result -> (register class, element bytes, shared address), once written."""

    tile: TmemTile
    store: object
    chain: tuple
    rows: tuple = ()
    written: dict = None


def _beside(em: Emitter, chain) -> dict:
    """The tiles the ops of ``chain`` read beside it (uniform tiles, column vectors), as they
    are now: value -> its registers (:func:`_slice` gives the ops a chunk of them)."""
    return {
        o: em.values[o]
        for x in chain[1:]
        for o in x.op.operands
        if o not in chain and isinstance(em.values.get(o), list)
    }


def _slice(em: Emitter, whole: dict, ks: list) -> None:
    """Bind each of ``whole``'s tiles to its registers ``ks`` (a chunk of columns); the caller
    puts ``whole`` back after the last chunk."""
    for o, regs in whole.items():
        em.values[o] = [regs[k] for k in ks]


def epilogue_of(em: Emitter, loop, j: int, tile: TmemTile):
    """The :class:`Epilogue` of resident result ``j`` of ``loop``, or None (it is read into
    registers whole): its uses lead through elementwise ops to one plain ``tiled_store``, all
    in the loop's block."""
    from tilegen.runtime.layouts.async_forms import chain_sides, elementwise, fragment_chain

    v = loop.results[j]
    while v.num_uses == 1 and elementwise(v.users[0]):
        v = v.users[0].results[0]
    store = v.users[0] if v.num_uses == 1 else None
    if store is None or store.name != "nv_tileaa.tiled_store":
        return None
    if "nv_tileas.tma_store" in store.attributes or tile.split:
        return None
    chain = fragment_chain(loop, store, result=j)
    if chain is None or not all(elementwise(x.op) for x in chain[1:]):
        return None
    if any(x.parent is not loop.parent for x in [store] + [x.op for x in chain[1:]]):
        return None
    rows = []
    for b in chain_sides(chain):
        src, res = b.operands[0], b.results[0]
        if res in em.values or tuple(src.type.shape)[0] != 1:
            continue  # (emitted already, or a column: one register a row)
        if b.parent is not loop.parent or any(tile.dl.wraps(1, k) for k in range(tile.dl.nregs)):
            return None
        rows.append((b, src))
    return Epilogue(tile, store, tuple(chain), tuple(rows), {})


def defer(em: Emitter, ep: Epilogue) -> None:
    """Leave ``ep``'s ops to its store: the chain's ops emit nothing where they stand; a row
    broadcast writes its vector to its own shared array (:func:`_write_row`), from the source
    of a ``convert_layout`` that only feeds it (which emits nothing)."""
    skip = lambda: None  # noqa: E731
    for x in ep.chain[1:]:
        em.replaced[x.op] = skip
    for b, src in ep.rows:
        conv = getattr(src, "op", None)
        if conv is not None and conv.name == "nv_tileas.convert_layout" and src.num_uses == 1:
            em.replaced[conv] = skip
            src = conv.operands[0]
        em.replaced[b] = lambda b=b, src=src: _write_row(em, ep, b, src)
    em.tmem_epilogues[ep.store] = ep


def _write_row(em: Emitter, ep: Epilogue, b, src) -> None:
    """Row broadcast ``b``: its vector ``src`` to a shared array of its own (read by
    :func:`rounds`, behind its barrier)."""
    from tilegen.runtime.codegen import fragment_sides
    from tilegen.runtime.layouts.async_forms import side_bytes

    at = em.resident_region(side_bytes(b), "row")
    cls, isize = fragment_sides.write(em, b, src, at, 0)
    ep.written[b.results[0]] = (cls, isize, at)


def rounds(em: Emitter, ep: Epilogue, groups: list):
    """(registers, the ``groups`` of register indices they complete) per chunk of ``ep``'s
    columns: the chunk read from tensor memory, the row vectors' elements of its columns read
    from shared memory, the chain's ops run on the chunk's registers, the stored tile's
    registers by index."""
    from tilegen.runtime.codegen import fragment_sides

    dl, store = ep.tile.dl, ep.store
    if ep.written:
        em.barrier()  # every thread's row vectors are written
    first_col = em.base(dl)[1]
    align = dl.root.size_per_thread[1]  # (the thread's first column: a multiple of it)
    whole = _beside(em, ep.chain)
    left = list(groups)
    for got in chunks(em, ep.tile):
        ks = sorted(got)
        em.set(ep.chain[0], [got[k] for k in ks])
        _slice(em, whole, ks)
        offs = [dl.raw[k][1] for k in ks]
        for res, (cls, isize, at) in ep.written.items():
            em.set(res, fragment_sides.read_elements(em, cls, isize, at, first_col, offs, align))
        for x in ep.chain[1:]:
            em.emit_here(x.op)
        out = dict(zip(ks, em.tile(store, ep.chain[-1])))
        done = [g for g in left if all(k in out for k in g)]
        left = [g for g in left if not all(k in out for k in g)]
        yield out, done
    em.values.update(whole)
    if left:
        from tilegen.runtime.codegen.core import fail

        fail(store, "PTX backend: a store's vector crosses two chunks of tensor memory")


def bind_results(em: Emitter, loop, slots: list) -> list:
    """``slots`` with each resident result that is used other than as the init of a loop that
    keeps it resident (or on the way to a store that reads it by chunks: :class:`Epilogue`)
    read into registers."""
    out = list(slots)
    for j, s in enumerate(slots):
        if not isinstance(s, TmemTile):
            continue
        r = loop.results[j]
        ep = epilogue_of(em, loop, j, s)
        if ep is not None:
            defer(em, ep)
            continue
        chained = all(
            u.name == "scf.for"
            and any(
                u.operands[3 + i] is r and slot(em, u, i) is not None
                for i in range(len(u.operands) - 3)
            )
            for u in r.users
        )
        if not chained:
            out[j] = materialize(em, s)
    return out


def copy_into(em: Emitter, slots: list, vals: list) -> tuple:
    """Store each value bound for a tensor-memory slot there (nothing when it is that slot's
    columns already: a yield, or a chain's next loop; an :class:`InitChunks` a chunk at a
    time); the other (slot, value) pairs."""
    rest_s, rest_v = [], []
    for s, v in zip(slots, vals):
        if not isinstance(s, TmemTile):
            rest_s.append(s)
            rest_v.append(v)
        elif isinstance(v, TmemTile):
            if v.col != s.col:
                store(em, s, materialize(em, v))
        elif isinstance(v, InitChunks):
            _store_init(em, s, v)
        else:
            store(em, s, v)
    return rest_s, rest_v


@dataclass(frozen=True)
class InitChunks:
    """A resident accumulator's initial value that its loop loads and writes into tensor
    memory a chunk of columns at a time (:func:`prepare`): the ``tiled_load`` and the values
    from its result to the loop's init (single-use elementwise ops in the accumulator's row
    layout, other operands uniform). C, a 256 x 256 tile loaded whole, would be 256 registers
    a thread."""

    load: object
    chain: tuple


def prepare(em: Emitter) -> None:
    """At the kernel's start: each resident accumulator whose initial value is such a chain
    (:class:`InitChunks`) has its ops emit nothing where they stand; the last one leaves the
    :class:`InitChunks` for the loop (``copy_into``)."""
    if em.sm not in (100, 103, 110):
        return
    for loop, j in plan_of(em).residents:
        found = _init_chain(loop, j)
        if found is None:
            continue
        load, chain = found
        init = InitChunks(load, tuple(chain))
        for x in chain[1:]:
            em.replaced[x.op] = lambda: None
        em.replaced[chain[-1].op] = lambda x=chain[-1], init=init: em.set(x, init)

        def tokens(load=load, init=init, only=len(chain) == 1) -> None:
            for r in load.results[1:]:
                em.set(r, None)
            if only:
                em.set(load.results[0], init)

        em.replaced[load] = tokens


def _init_chain(loop, j: int):
    """(the ``tiled_load``, [its result .. loop ``loop``'s init ``j``]) for :class:`InitChunks`,
    or None."""
    from tilegen.runtime.layouts.async_forms import elementwise, uniform_tile
    from tilegen.runtime.layouts.decisions import cp_async_width

    v = loop.operands[3 + j]
    lay = v.type.encoding
    chain = [v]
    while True:
        op = getattr(v, "op", None)
        if op is None or op.parent is not loop.parent or v.num_uses != 1:
            return None
        if getattr(v.type, "encoding", None) != lay:
            return None
        if op.name == "nv_tileaa.tiled_load":
            if v is not op.results[0] or op.opdef.operand_group(op, "mask"):
                return None
            if cp_async_width(op) or "nv_tileas.tma_load" in op.attributes:
                return None
            if _writes_between(op, loop):  # (the load moves to the loop's entry)
                return None
            return op, chain[::-1]
        if not elementwise(op):
            return None
        varying = [o for o in op.operands if getattr(o.type, "rank", 0) and not uniform_tile(o)]
        if len(varying) != 1:
            return None
        v = varying[0]
        chain.append(v)


#: ops that only read memory: a load may move past them
_READS = ("nv_tileaa.tiled_load", "nv_tileaa.load", "nv_tileaa.gather_load")


def _writes_between(first, last) -> bool:
    """Whether an op between ``first`` and ``last`` (one block) may write memory."""
    from tilegen.runtime.rewrite.ir_utils import is_effect_free

    ops = list(first.parent.ops)
    between = ops[ops.index(first) + 1 : ops.index(last)]
    return any(x.name not in _READS and not is_effect_free(x) for op in between for x in op.walk())


def _store_init(em: Emitter, tile: TmemTile, init: InitChunks) -> None:
    """Load ``init``'s tile a chunk of ``tile``'s columns at a time, run its chain on the
    chunk and store it to tensor memory (``tcgen05.st``)."""
    from tilegen.runtime.codegen.memory import load_rounds

    _tmem(em)
    cols = by_column(tile.dl, tile.part)
    starts = range(0, tile.part, CHUNK)
    rounds = [[k for c in range(c0, c0 + CHUNK) for k in cols.get(c, ())] for c0 in starts]
    whole = _beside(em, init.chain)
    cache: dict = {}
    for c0, got in zip(starts, load_rounds(em, init.load, rounds)):
        ks = sorted(got)
        em.set(init.chain[0], [got[k] for k in ks])
        _slice(em, whole, ks)
        for x in init.chain[1:]:
            em.emit_here(x.op)
        regs = dict(zip(ks, em.tile(init.load, init.chain[-1])))
        n = min(CHUNK, tile.part)
        words = [_b32(em, regs[cols[c0 + i][0]], cache) for i in range(n)]
        store_chunk(em, tile.warp_stride, tile.col, c0, words, tile.split)
    em.values.update(whole)
    em.ins("tcgen05.wait::st.sync.aligned")
