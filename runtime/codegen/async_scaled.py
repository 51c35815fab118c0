"""The async K loop's *scaled accumulate* (docs/pipelines.md section 12): a loop whose dot starts
from zero every stage and whose body scales that partial product into the carried value -
the block-scaled GEMM's ``acc + dot(a, b, 0) * sa * sb`` (runtime/passes/async_rule.py
``scaled_chain`` is the rule).

The consumers hold every M x N tile of the body in their accumulator's register order - the
wgmma fragment on sm_90a (:class:`WgmmaOrder`), TMEM rows on sm_100a (:class:`RowsOrder`) - so
the body's elementwise ops run through the ordinary handlers register by register. The *side
vectors* (M x 1, 1 x N, 1 x 1 tiles: the scales) are loaded by each thread for its own rows
and columns (:func:`side_vectors`) and broadcast by position (:func:`scaled_update`). On
sm_100a a warp of the producer warp group issues the MMAs into two TMEM buffers in turn
(:func:`tcgen05_issuer`), so the consumers scale one stage's product while the next is
computed (:func:`tcgen05_consumer`).
"""

from __future__ import annotations

from tilegen.runtime.codegen.core import Emitter, fail
from tilegen.runtime.codegen.pipeline import Ring, mbarrier_wait
from tilegen.runtime.codegen.wgmma_fragment import fragment_thread

#: on a side vector load the producer copies into the stage (async_rule.staged_sides)
STAGED_ATTR = "nv_tileas.async_staged"


def _rank(v) -> int:
    return getattr(v.type, "rank", 0)


def scaled_slice(body, dot) -> list:
    """The body ops the scaled accumulate needs, in order: what the yielded value depends on,
    short of the dot's result and the block arguments."""
    need, todo = set(), [body.ops[-1].operands[0]]
    while todo:
        v = todo.pop()
        o = getattr(v, "op", None)
        if o is None or o is dot or o.parent is not body or o in need:
            continue
        need.add(o)
        todo.extend(o.operands)
    return [o for o in body.ops if o in need]


class WgmmaOrder:
    """sm_90a: register ((q (N / 8) + j) 2 + h) 2 + s of an M x N tile is the wgmma fragment's
    element at row r0 + 64 q + 8 h, column 2 t + 8 j + s (r0: the thread's first fragment
    row, t = lane % 4); a side vector's register 2 q + h is row (q, h), 2 j + s column (j, s)."""

    def __init__(self, em: Emitter, M: int, N: int):
        self.em, self.M, self.N = em, M, N
        self.nq = M // (16 * em.num_warps)
        self._thread = lambda: fragment_thread(em, M)

    def rows(self) -> tuple:
        """(this thread's first row: a register, [row offset of each register])."""
        return self._thread()[0], [64 * q + 8 * h for q in range(self.nq) for h in range(2)]

    def cols(self) -> tuple:
        t = self._thread()[2]
        c0 = self.em.new("b32")
        self.em.ins(f"shl.b32 {c0}, {t}, 1")
        return c0, [8 * j + s for j in range(self.N // 8) for s in range(2)]

    def expand(self, shape: tuple, regs: list) -> list:
        """A side vector's registers broadcast to the M x N tile's order."""
        col = shape == (1, self.N)
        return [
            regs[2 * j + s] if col else regs[2 * q + h]
            for q in range(self.nq)
            for j in range(self.N // 8)
            for h in range(2)
            for s in range(2)
        ]

    def length(self, shape: tuple) -> int:
        return {(self.M, 1): 2 * self.nq, (1, self.N): self.N // 4}.get(shape, 1)

    #: what the first column (:meth:`cols`) is a multiple of
    col_align = 2


class RowsOrder:
    """sm_100a, M 128, over G = warps / 4 column groups: warp w holds TMEM lanes (rows)
    32 (w % 4) .., one row a thread, and the columns (w / 4) N / G .. of it in order; a side
    vector is one register (M x 1) or N / G (1 x N)."""

    def __init__(self, em: Emitter, M: int, N: int):
        self.em, self.M, self.N = em, M, N
        self.groups = em.num_warps // 4
        self.cols_per = N // self.groups
        _, lane, warp = em.tid()
        self.row = em.new("b32")  # 32 (warp % 4) + lane
        em.ins(f"and.b32 {self.row}, {warp}, 3")
        em.ins(f"mad.lo.s32 {self.row}, {self.row}, 32, {lane}")
        self.col = em.new("b32")  # (warp / 4) N / G
        em.ins(f"shr.u32 {self.col}, {warp}, 2")
        em.ins(f"mul.lo.s32 {self.col}, {self.col}, {self.cols_per}")

    def rows(self) -> tuple:
        return self.row, [0]

    def cols(self) -> tuple:
        return self.col, list(range(self.cols_per))

    def expand(self, shape: tuple, regs: list) -> list:
        return list(regs) if shape == (1, self.N) else [regs[0]] * self.cols_per

    def length(self, shape: tuple) -> int:
        return self.cols_per if shape == (1, self.N) else 1

    @property
    def col_align(self) -> int:
        return self.cols_per


def side_vectors(em: Emitter, chain: list, order) -> None:
    """The index math and the side vector loads (M x 1, 1 x N, 1 x 1 ``tiled_load``s) of the
    scaled accumulate, each thread loading the elements of its own rows / columns in
    ``order``'s register order (a 1 x 1 tile: one register, the same element everywhere)."""
    from tilegen.runtime.codegen.memory import (
        _space,
        _tiled_operands,
        ld_opcode,
        load_elems,
        mem_types,
        scaled_offset,
        uniform_padding,
    )

    M, N = order.M, order.N
    for o in chain:
        if not any(_rank(r) for r in o.results):
            em.emit_op(o)  # index math
            continue
        if o.name != "nv_tileaa.tiled_load" or STAGED_ATTR in o.attributes:
            continue  # (a staged one is read from the stage: staged_vectors)
        mem, indices, in_bounds = _tiled_operands(em, o)
        starts = [em.scalar(o, v) for v in indices]
        pad = uniform_padding(em, o)
        kt = mem_types(o, mem.element)
        opcode = ld_opcode(em, o, _space(mem.type))
        shape = tuple(o.results[0].type.shape)
        first = list(starts)
        if shape == (M, 1):
            axis = 0
            base, pos = order.rows()
            first[0] = em.lincomb(0, [(1, starts[0]), (1, base)])
        elif shape == (1, N):
            axis = 1
            base, pos = order.cols()
            first[1] = em.lincomb(0, [(1, starts[1]), (1, base)])
        else:  # 1 x 1
            axis, pos = 1, [0]
        addr = mem.ptr
        for i, x in enumerate(first):
            if isinstance(x, int) and x == 0:
                continue
            n = em.new("b64")
            em.ins(f"add.s64 {n}, {addr}, {scaled_offset(em, x, None, mem.strides[i], kt[1])}")
            addr = n
        fixed = None  # the other dim's bound, the same for every register
        if not in_bounds[1 - axis]:
            fixed = em.lt_u(first[1 - axis], mem.sizes[1 - axis])
        stride = mem.strides[axis]
        regs = []
        for k in pos:
            guard = fixed
            if not in_bounds[axis]:
                p = em.lt_u(em.lincomb(k, [(1, first[axis])]), mem.sizes[axis])
                if guard is not None:
                    both = em.new("pred")
                    em.ins(f"and.pred {both}, {guard}, {p}")
                    p = both
                guard = p
            if not k:
                ref = f"[{addr}]"
            elif isinstance(stride, int):
                ref = f"[{addr}+{k * stride * kt[1]}]"
            else:
                a = em.new("b64")
                em.ins(f"add.s64 {a}, {addr}, {scaled_offset(em, k, None, stride, kt[1])}")
                ref = f"[{a}]"
            regs += load_elems(em, opcode, kt, guard, [pad], ref)
        em.set(o.results[0], regs)
        for r in o.results[1:]:
            em.set(r, None)


def staged_vectors(em: Emitter, sides: list, order, sbase) -> None:
    """The staged side vectors (1 x N rows the producer copied, unswizzled, into the stage at
    ``sbase``; TMA filled what lies outside the tensor with zeros): each thread reads its
    columns in ``order``, in vector loads of up to 16 bytes where they run on."""
    from tilegen.runtime.codegen.memory import mem_types

    for x in sides:
        cls, esz, lt, _ = mem_types(x.load, x.elem)
        c0, pos = order.cols()
        at = em.new("b32")
        em.ins(f"mad.lo.s32 {at}, {c0}, {esz}, {sbase}")
        regs, k = [], 0
        while k < len(pos):
            v = 1
            while (
                v * 2 * esz <= 16
                and v * 2 <= order.col_align
                and pos[k] % (v * 2) == 0
                and pos[k : k + v * 2] == list(range(pos[k], pos[k] + v * 2))
            ):
                v *= 2
            dst = [em.new(cls) for _ in range(v)]
            vec = f".v{v}" if v > 1 else ""
            out = f"{{{', '.join(dst)}}}" if v > 1 else dst[0]
            em.ins(f"ld.shared{vec}.{lt} {out}, [{at}+{x.offset + pos[k] * esz}]")
            regs += dst
            k += v
        em.set(x.load.results[0], regs)
        for r in x.load.results[1:]:
            em.set(r, None)


def scaled_update(em: Emitter, body, chain, dot, part, acc, order) -> None:
    """acc <- the body's elementwise ops on the partial product (``part``), the carried value
    (``acc``), uniform tiles and the side vectors broadcast by position: register k of every
    M x N tile is element k of ``order`` (and of a side vector, its row or column k), so the
    ordinary handlers compute it register by register."""
    em.values[dot.results[0]] = part
    em.values[body.args[1]] = acc
    M, N = order.M, order.N
    for o in chain:
        if o.name == "nv_tileaa.tiled_load" or not any(_rank(r) for r in o.results):
            continue
        if o.name == "nv_tileas.convert_layout":  # of a side vector: already in order
            em.set(o.results[0], em.get(o.operands[0]))
            continue
        shape = tuple(o.results[0].type.shape)
        src = o.operands[0] if o.name == "nv_tileaa.broadcast" else None
        sshape = tuple(src.type.shape) if src is not None else ()
        if sshape in ((M, 1), (1, N)) and shape == (M, N):
            em.set(o.results[0], order.expand(sshape, em.tile(o, src)))
            continue
        if shape in ((M, 1), (1, N), (1, 1)) and o.name != "nv_tileaa.broadcast":
            # an elementwise op on side vectors: its uniform operands (splats, laid out by the
            # layout stage) take this order's register count
            n = order.length(shape)
            for v in o.operands:
                regs = em.values.get(v)
                if isinstance(regs, list) and len(regs) != n:
                    if len(set(regs)) != 1:
                        fail(o, "PTX backend: a side vector operand out of the consumers' order")
                    em.values[v] = [regs[0]] * n
        em.emit_op(o)
    new = em.tile(body.ops[-1], body.ops[-1].operands[0])
    cls = em.reg_class(acc[0])
    for a, r in zip(acc, new):
        if a != r:
            em.ins(f"mov.{cls} {a}, {r}")


# --------------------------------------------------------------------------- sm_100a (tcgen05)

#: bytes of the TMEM-buffer barriers beside the stage ring's: full[2] (the issuer's
#: tcgen05.commit) and empty[2] (every consumer thread, once it read the buffer)
TMEM_BARRIER_BYTES = 32


def tcgen05_issuer(em: Emitter, v: dict) -> None:
    """The producer warp group's second warp: one elected lane issues each stage's MMAs into
    TMEM buffer ``i % 2`` (columns ``(i % 2) N ..``) once the stage landed and the consumers
    emptied that buffer, and commits them to the stage's empty barrier (the copies may reuse
    it) and to the buffer's full barrier (the consumers may read it). The other producer warps
    go on to the copies (the first) or leave."""
    from tilegen.runtime.codegen.async_loop import ASYNC_SYMBOL, loop_head

    tid, nthreads, base = v["tid"], v["nthreads"], v["base"]
    stages, stage_bytes, bar, N = v["stages"], v["stage_bytes"], v["bar"], v["N"]
    tbar = v["tbar_off"]
    skip = em.new_label("async_not_issuer")
    p = em.new("pred")
    em.ins(f"setp.lt.u32 {p}, {tid}, {nthreads + 32}")
    em.ins(f"@{p} bra {skip}")
    em.ins(f"setp.ge.u32 {p}, {tid}, {nthreads + 64}")
    em.ins(f"@{p} bra {skip}")
    leader, elected = em.new("pred"), em.new("b32")
    em.ins(f"elect.sync {elected}|{leader}, -1")
    done = em.new_label("async_issuer_done")
    em.ins(f"@!{leader} bra {done}")
    taddr = em.new("b32")
    em.ins(f"ld.shared.u32 {taddr}, [{ASYNC_SYMBOL}+{v['tmem_off']}]")
    ring, tring = Ring(stages), Ring(2)
    ring.start(em, 0)
    tring.start(em, 0)
    iv = em.mov(v["iv_cls"], v["lb"])
    acc_in = em.new("pred")
    top, end = loop_head(em, "async_issue", v["ty"], iv, v["ub"])
    mbarrier_wait(em, bar(0, ring.stage), ring.phase)
    lap = em.new("b32")
    em.ins(f"xor.b32 {lap}, {tring.phase}, 1")
    mbarrier_wait(em, _tbar(em, base, tbar, 1, tring.stage), lap)
    em.ins("tcgen05.fence::after_thread_sync")
    sbase, dst = em.new("b32"), em.new("b32")
    em.ins(f"mad.lo.s32 {sbase}, {ring.stage}, {stage_bytes}, {base}")
    em.ins(f"mad.lo.s32 {dst}, {tring.stage}, {N}, {taddr}")
    em.ins(f"setp.ne.u32 {acc_in}, 0, 0")  # each stage's product starts from zero
    v["mmas"](em, sbase, dst, acc_in, tid)
    commit = "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64"
    em.ins(f"{commit} [{bar(1, ring.stage)}]")
    em.ins(f"{commit} [{_tbar(em, base, tbar, 0, tring.stage)}]")
    ring.advance(em)
    tring.advance(em)
    em.ins(f"add.{v['ty']} {iv}, {iv}, {v['step']}")
    em.ins(f"bra {top}")
    em.label(end)
    em.label(done)
    em.ins("ret")
    em.label(skip)


def _tbar(em: Emitter, base, tbar_off: int, kind: int, buf) -> str:
    """Shared address of TMEM buffer ``buf``'s full (kind 0) or empty (kind 1) barrier."""
    r = em.new("b32")
    em.ins(f"mad.lo.s32 {r}, {buf}, 8, {base}")
    em.ins(f"add.s32 {r}, {r}, {tbar_off + 16 * kind}")
    return r


def tcgen05_consumer(em: Emitter, op, v: dict) -> list:
    """sm_100a consumers of a scaled accumulate (M 128, G = warps / 4 column groups): per
    iteration each thread loads its side vectors, waits for the TMEM buffer the issuer filled,
    reads its row's N / G columns of the partial product (``tcgen05.ld.32x32b``), frees the
    buffer and runs the body's elementwise ops in :class:`RowsOrder`; the accumulator stays in
    registers. Returns them (row order: the TMA store writes them by position)."""
    from tilegen.runtime.codegen.async_loop import ASYNC_SYMBOL, loop_head

    body, dot, M, N = v["body"], v["dot"], v["M"], v["N"]
    base, tbar, init = v["base"], v["tbar_off"], v["init"]
    if not init or len(set(init)) != 1:
        fail(op, "PTX backend: a scaled accumulate on sm_100a starts from a uniform tile")
    order = RowsOrder(em, M, N)
    cls = em.reg_class(init[0]) or "f32"
    acc = [em.mov(cls, init[0]) for _ in range(order.cols_per)]
    chain = scaled_slice(body, dot)
    taddr = em.new("b32")
    em.ins(f"ld.shared.u32 {taddr}, [{ASYNC_SYMBOL}+{v['tmem_off']}]")
    _, _, warp = em.tid()
    src0 = em.new("b32")  # TMEM lane field (32 (warp % 4)) << 16, plus this group's columns
    em.ins(f"and.b32 {src0}, {warp}, 3")
    em.ins(f"shl.b32 {src0}, {src0}, 21")
    em.ins(f"add.s32 {src0}, {src0}, {taddr}")
    em.ins(f"add.s32 {src0}, {src0}, {order.col}")
    tring = Ring(2)
    tring.start(em, 0)
    sides = v["sides"]
    ring = Ring(v["stages"])  # the stage ring, for the staged side vectors
    if sides:
        ring.start(em, 0)
    iv = em.mov(v["iv_cls"], v["lb"])
    top, end = loop_head(em, "async_scale", v["ty"], iv, v["ub"])
    em.values[body.args[0]] = iv
    side_vectors(em, chain, order)
    if sides:  # read from the stage, which then waits for these threads too (its empty count)
        bar = v["bar"]
        mbarrier_wait(em, bar(0, ring.stage), ring.phase)
        sbase = em.new("b32")
        em.ins(f"mad.lo.s32 {sbase}, {ring.stage}, {v['stage_bytes']}, {base}")
        staged_vectors(em, sides, order, sbase)
        em.ins(f"mbarrier.arrive.shared::cta.b64 _, [{bar(1, ring.stage)}]")
        ring.advance(em)
    mbarrier_wait(em, _tbar(em, base, tbar, 0, tring.stage), tring.phase)
    em.ins("tcgen05.fence::after_thread_sync")
    buf = em.new("b32")
    em.ins(f"mad.lo.s32 {buf}, {tring.stage}, {N}, {src0}")
    raw = []
    for chunk in range(order.cols_per // 32):
        regs = [em.new("b32") for _ in range(32)]
        src = buf
        if chunk:
            src = em.new("b32")
            em.ins(f"add.s32 {src}, {buf}, {32 * chunk}")
        em.ins(f"tcgen05.ld.sync.aligned.32x32b.x32.b32 {{{', '.join(regs)}}}, [{src}]")
        raw += regs
    em.ins("tcgen05.wait::ld.sync.aligned")
    em.ins("tcgen05.fence::before_thread_sync")
    em.ins(f"mbarrier.arrive.shared::cta.b64 _, [{_tbar(em, base, tbar, 1, tring.stage)}]")
    part = []
    for r in raw:
        x = em.new(cls)
        em.ins(f"mov.b32 {x}, {r}")
        part.append(x)
    scaled_update(em, body, chain, dot, part, acc, order)
    tring.advance(em)
    em.ins(f"add.{v['ty']} {iv}, {iv}, {v['step']}")
    em.ins(f"bra {top}")
    em.label(end)
    return acc, order
