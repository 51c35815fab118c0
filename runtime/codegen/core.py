"""The kernel emitter every codegen module stands on.

One :class:`Emitter` walks one laid-out ``nv_tileaa.func`` and prints PTX into ``body``. Op
handlers live in the concern modules (elementwise, memory, shape, reduce, control, debug) and
register themselves with :func:`handles`; the emitter dispatches on the op name, then on the
predicate handlers (for families such as "any elementwise op"), else reports a located
``PTX backend does not support 'OP' yet``.

Value representation (``Emitter.values``): a scalar is one register name (or a PTX immediate);
a rank>=1 tile is a list of register names, one per register of its layout (see
:mod:`tilegen.runtime.codegen.dist`); a rank-0 tile is a scalar; a memref is a
:class:`Memref`; tokens map to ``None``. A register's class is its value's element type's
(:data:`ELEMENTS`: i32 -> b32, i64 -> b64, ...); :meth:`Emitter.set` checks it.

Index values (offsets, sizes, strides, coordinates) are ints or registers of class ``b32`` (a
signed i32) or ``b64`` (a signed i64). Index arithmetic is done in the widest class among its
operands: :meth:`Emitter.lincomb` and :meth:`Emitter.lt_u` widen an i32 operand explicitly
(``cvt.s64.s32``) where it meets an i64 one, and never mix widths in one instruction. Shared
memory addresses are 32-bit: :meth:`Emitter.smem_addr` narrows a 64-bit index explicitly
(``cvt.u32.u64``; tiles and scratch buffers are far below 2^31 elements).
"""

from __future__ import annotations

from typing import Callable, Optional

from tilegen.runtime.codegen.dist import Dist, dist
from tilegen.runtime.codegen.regs import RegAlloc
from tilegen.runtime.diagnostics import Diagnostic
from tilegen.runtime.layouts.attrs import WARP_SIZE
from tilegen.runtime.records import dataclass
from tilegen.runtime.types import FloatType, IntegerType, NvPointerType, TileType

WARP = WARP_SIZE
SMEM_SYMBOL = "__tilegen_smem"
PIPE_SYMBOL = "__tilegen_pipe"


class CodegenError(Exception):
    def __init__(self, diagnostics):
        super().__init__(diagnostics[0].message if diagnostics else "codegen failed")
        self.diagnostics = diagnostics


def fail(op, message: Optional[str] = None):
    message = message or f"PTX backend does not support '{op.name}' yet"
    raise CodegenError([Diagnostic("error", message, op.loc)])


# ----------------------------------------------------------------------------- registry
HANDLERS: dict[str, Callable] = {}
#: (predicate(op), handler) pairs tried in order when no name matches
FAMILY_HANDLERS: list[tuple[Callable, Callable]] = []


def handles(*names: str):
    def deco(fn):
        for n in names:
            HANDLERS[n] = fn
        return fn

    return deco


def handles_family(pred: Callable):
    def deco(fn):
        FAMILY_HANDLERS.append((pred, fn))
        return fn

    return deco


_LOADED = False


def load_handlers() -> None:
    """Import the concern modules (each registers its handlers)."""
    global _LOADED
    if _LOADED:
        return
    import importlib

    for mod in ("elementwise", "memory", "shape", "reduce", "control", "debug", "mma"):
        try:
            importlib.import_module(f"tilegen.runtime.codegen.{mod}")
        except ModuleNotFoundError as e:  # a concern module not written yet
            if e.name != f"tilegen.runtime.codegen.{mod}":
                raise
    _LOADED = True


# ----------------------------------------------------------------------------- element types
#: element key -> (register class, bytes, ld/st type suffix)
ELEMENTS: dict[str, tuple[str, int, str]] = {
    "i1": ("pred", 1, "u8"),
    "i8": ("b16", 1, "s8"),
    "i16": ("b16", 2, "b16"),
    "i32": ("b32", 4, "b32"),
    "i64": ("b64", 8, "b64"),
    "f16": ("b16", 2, "b16"),
    "bf16": ("b16", 2, "b16"),
    "f32": ("f32", 4, "f32"),
    "f64": ("f64", 8, "f64"),
    "tf32": ("b32", 4, "b32"),
    "f8E4M3FN": ("b16", 1, "u8"),
    "f8E5M2": ("b16", 1, "u8"),
    # 4-bit elements in registers only (the low nibble of a b16; pack / unpack make bytes)
    "i4": ("b16", 1, "u8"),
    "f4E2M1FN": ("b16", 1, "u8"),
    "ptr": ("b64", 8, "b64"),
}


def elem_key(t) -> Optional[str]:
    """'f32', 'i8', 'ptr', ... for an element (or scalar, or tile) type."""
    if isinstance(t, TileType):
        t = t.element
    if isinstance(t, FloatType):
        return t.name
    if isinstance(t, IntegerType):
        return f"i{t.width}"
    if isinstance(t, NvPointerType):
        return "ptr"
    return None


def elem_info(op, t) -> tuple[str, int, str]:
    key = elem_key(t)
    if key not in ELEMENTS:
        fail(op, f"PTX backend does not support element type {t} in '{op.name}' yet")
    return ELEMENTS[key]


class Memref:
    """A memref in registers: base pointer, per-dim size and stride operands (register names
    or ints), element key, address space, and the IR type."""

    def __init__(self, ptr, sizes, strides, element, address_space, type_=None):
        self.ptr, self.sizes, self.strides, self.element = ptr, sizes, strides, element
        self.address_space, self.type = address_space, type_


def is_tile(t) -> bool:
    return isinstance(t, TileType) and t.rank >= 1


def _value_class(v) -> Optional[str]:
    """The register class an integer or pointer value (or tile of them) must live in."""
    t = getattr(v, "type", None)
    if isinstance(t, TileType):
        t = t.element
    if not isinstance(t, (IntegerType, NvPointerType)):
        return None
    key = elem_key(t)
    return ELEMENTS[key][0] if key in ELEMENTS else None


# ----------------------------------------------------------------------------- emitter
#: where :meth:`Emitter.scratch_into_ring`'s barrier goes, until the kernel is emitted
_HOIST_MARK = "\t// (the consumers' hoisted set-up)"
_RING_MARK = "\t// tilegen: scratch in the stage ring from here"


@dataclass
class RingScratch:
    """The scratch buffer moved into an async loop's idle stage ring: the ring's address
    register and symbol, its idle bytes, the barrier lines, the bytes claimed since."""

    reg: str
    symbol: str
    limit: int
    lines: list
    used: int = 0


class Emitter:
    def __init__(self, func, num_warps: int, sm: int):
        self.func, self.num_warps, self.sm = func, num_warps, sm
        self.regs = RegAlloc()
        self.body: list[str] = []
        #: thread-invariant setup (coordinates, scratch addresses) hoisted to the kernel entry,
        #: so a value first needed inside a branch or loop is defined on every path
        self.pre: list[str] = []
        #: where hoisted set-up goes instead of ``pre`` (:meth:`hoist_from_here`)
        self.hoist_into: Optional[list] = None
        self._sink = self.body
        self._smem_refs: dict = {}
        self.values: dict = {}
        self.smem_bytes = 0
        self.pipe_bytes = 0  # the pipelined loops' stage buffers (pipe_region)
        self.pipe_cap = 0  # the shared memory they were fitted in (control._pipeline_plan)
        self.async_smem = 0  # the async K loop's stages, barriers and maps (async_loop.py)
        #: loop-invariant wgmma A operands written once before their loop (invariant_a.py
        #: ``keep_invariant_a``): dot -> b32 register with the region's shared address
        self.resident_a: dict = {}
        #: register -> (base register or None, constant, small): codegen/affine.py
        self.affine: dict = {}
        #: (value, layout, bytes, element size, fields) -> the region keeping it (invariant_a.py)
        self.resident_by_value: dict = {}
        self.resident_bytes = 0
        #: the kernel's tensor memory and tcgen05 MMA barrier (tcgen05_dot.tensor_memory)
        self.tmem = None
        #: the kernel runs a producer warp group beside its ``num_warps`` (an async K loop):
        #: what those warps run of the layouts' code (the prologue before the split) takes
        #: their warp index modulo ``num_warps``, so it stays inside each tile
        self.producer_warps = False
        #: while a pipelined K loop's body is emitted: its dot whose MMAs are waited for a
        #: step later (deferred_mma.py), or None
        self.mma_defer = None
        #: the accumulators kept in tensor memory across their loops (tmem_resident.plan_of)
        self.tmem_plan = None
        #: the kernel runs on a CTA pair (docs/pipelines.md section 18): tile block ids are
        #: cluster ids
        self.cta_pair = False
        #: wgmma dots committed without a wait: their caller waits (async_overlap.py)
        self.wgmma_deferred: set = set()
        #: ops between a cp.async-staged load and its dot (memory.StagePlan.chain): they pass
        #: the ``memory.Staged`` through unless the dot materializes it
        self.staged_chain: set = set()
        #: loop-invariant A operands the async producer copies by TMA (async_kept.py)
        self.kept_tma: list = []
        #: op -> (code to emit before it, code after it): the async general form's per-box
        #: stage waits and releases (async_loop._box_hooks); emitted each time the op is
        self.op_hooks: dict = {}
        #: op -> what to emit instead of it where it stands (nothing: an op another op emits
        #: later, such as a TMEM-resident result's epilogue, run by its store a chunk at a
        #: time: tmem_resident.Epilogue)
        self.replaced: dict = {}
        #: store op -> the tmem_resident.Epilogue it runs
        self.tmem_epilogues: dict = {}
        self._pipe_reg: Optional[str] = None
        self.isa = (0, 0)  # the least PTX ISA version an emitted instruction needs
        self.target_suffix = ""  # "a": an instruction needs the arch-specific target (sm_90a)
        #: the target variant the user asked for ("" lets the kernel take "a": emit.py)
        self.user_suffix = ""
        self.globals: list[str] = []  # module-level declarations this kernel needs
        self._labels = 0
        self._tid: Optional[tuple[str, str, str]] = None
        self._base: dict = {}
        self._coord: dict = {}
        self._smem_reg: Optional[str] = None
        #: after an async K loop, the scratch in its idle stage ring (:meth:`scratch_into_ring`)
        self.ring_scratch: Optional[RingScratch] = None
        self.ring_scratch_allowed = True
        #: the scratch before an async K loop's frame, in its ring (:meth:`scratch_before_ring`)
        self.ring_pre: Optional[RingScratch] = None
        self.ring_pre_allowed = True
        self.symbol = func.attributes["sym_name"].value
        #: threads beside the kernel's warps (the async K loop's producer warp group,
        #: async_loop.py); from where they split off, barriers are over the consumers alone
        self.producer_threads = 0
        #: the prologue ops the GEMM form's consumers emit after the split (emit.py)
        self.deferred: list = []
        self.tmem_rows = None  # a tcgen05 accumulator the TMA store reads by chunks (tmem_chunks)
        self.barrier_threads: Optional[int] = None
        #: ``--lineinfo`` / ``-g``: the module's .file table (codegen/lineinfo.py); None: no .loc
        self.lines = None
        self._last_loc = None  # the (file, line, col) of the last .loc in the body
        self._pending_loc = None  # the position of the next body instruction, if it differs

    @property
    def num_threads(self) -> int:
        return self.num_warps * WARP

    # ----- text
    def ins(self, text: str) -> None:
        if self._pending_loc is not None and self._sink is self.body:
            self.body.append("\t" + self.lines.directive(self._pending_loc))
            self._last_loc, self._pending_loc = self._pending_loc, None
        self._sink.append("\t" + text + ";")

    def hoisted(self):
        """Context: instructions go to the kernel prologue (they may only depend on the thread
        id and kernel parameters)."""
        em = self

        class _Hoist:
            def __enter__(self):
                self.saved = em._sink
                em._sink = em.pre if em.hoist_into is None else em.hoist_into

            def __exit__(self, *exc):
                em._sink = self.saved

        return _Hoist()

    def hoist_from_here(self) -> None:
        """Hoisted set-up from here on goes here, not to the kernel's entry: the consumers'
        branch of an async loop, whose addresses then do not stay live across the producer's
        ``setmaxnreg.dec`` (every later instruction is the consumers'). :meth:`splice_hoisted`
        puts it in place once the body is emitted."""
        if self.hoist_into is not None:  # (already the consumers': the first mark stays)
            return
        self.hoist_into = []
        self.body.append(_HOIST_MARK)

    def splice_hoisted(self) -> None:
        if self.hoist_into is not None:
            i = self.body.index(_HOIST_MARK)
            self.body[i : i + 1] = self.hoist_into
            self.hoist_into = None

    def label(self, name: str) -> None:
        self.body.append(f"{name}:")

    def new_label(self, prefix: str = "L") -> str:
        self._labels += 1
        return f"$L__{prefix}_{self._labels}"

    def new(self, cls: str) -> str:
        return self.regs.new(cls)

    def mov(self, cls: str, src) -> str:
        r = self.new(cls)
        self.ins(f"mov.{'pred' if cls == 'pred' else cls} {r}, {src}")
        if cls in ("b32", "b64") and (
            isinstance(src, int) or (isinstance(src, str) and src.lstrip("-").isdigit())
        ):  # an integer constant (codegen/affine.py)
            v = int(src)
            self.affine[r] = (None, v, 0 <= v < (1 << 30))
        return r

    # ----- values
    def get(self, v):
        if v not in self.values:
            op = v.op if hasattr(v, "op") else None
            fail(op or self.func, "PTX backend: value used before it was emitted")
        return self.values[v]

    def set(self, v, x) -> None:
        cls = _value_class(v)
        if cls is not None:
            for r in x if isinstance(x, list) else (x,):
                have = self.regs.class_of(r)
                if have is not None and have != cls:
                    op = getattr(v, "op", None)
                    fail(
                        op or self.func,
                        f"PTX backend: internal error: a {v.type} value in register {r} of "
                        f"class {have} (expected {cls})",
                    )
        self.values[v] = x

    def scalar(self, op, v) -> str:
        r = self.values.get(v)
        if not isinstance(r, (str, int)):
            fail(op, f"PTX backend: operand of '{op.name}' is not a supported scalar")
        return r

    def tile(self, op, v) -> list:
        r = self.values.get(v)
        if not isinstance(r, list):
            fail(op, f"PTX backend: operand of '{op.name}' is not a supported tile")
        return r

    def dist_of(self, op, t) -> Dist:
        if not is_tile(t) or t.encoding is None:
            fail(op, f"PTX backend: '{op.name}' has a tile without a layout")
        try:
            return dist(t.encoding, tuple(t.shape))
        except ValueError:
            fail(op, f"PTX backend does not support the layout {t.encoding} yet")

    # ----- walking
    def emit_block(self, block) -> None:
        for op in block.ops:
            self.emit_op(op)

    def emit_op(self, op) -> None:
        if self.replaced and op in self.replaced:
            return self.replaced[op]()
        hooks = self.op_hooks.get(op) if self.op_hooks else None
        if hooks is None:
            return self._emit_op(op)
        hooks[0]()
        self._emit_op(op)
        hooks[1]()

    def emit_here(self, op) -> None:
        """``op``'s own code here (an op :attr:`replaced` leaves to another op)."""
        self._emit_op(op)

    def _emit_op(self, op) -> None:
        if op in self.staged_chain:  # a view/permute/convert between a staged load and its dot
            x = self.get(op.operands[0])
            if op.name == "nv_tileaa.permute" and getattr(x, "flips", False):
                x = x.flipped()  # (one path of several: memory._boxed_plan)
            self.set(op.results[0], x)
            return
        if self.tmem_plan is not None and op in self.tmem_plan.rescales:
            from tilegen.runtime.codegen.tmem_resident import rescale

            if rescale(self, op):  # an accumulator in tensor memory, scaled in place
                return
        h = HANDLERS.get(op.name)
        if h is None:
            for pred, fn in FAMILY_HANDLERS:
                if pred(op):
                    h = fn
                    break
        if h is None:
            fail(op)
        if self.lines is not None:
            self.mark(op.loc)
        h(self, op)
        if op.regions and self.lines is not None:
            self.mark(op.loc)  # the op's own code after its regions (a loop's back edge)

    def mark(self, loc) -> None:
        """A ``.loc`` for ``loc`` before the next body instruction (``--lineinfo``), unless it
        is the position already in effect or names no source."""
        from tilegen.runtime.codegen.lineinfo import source_of

        src = source_of(loc)
        if src is not None:
            self._pending_loc = None if src == self._last_loc else src

    # ----- thread coordinates
    def tid(self) -> tuple[str, str, str]:
        """(tid, lane, warp) registers, computed once at the kernel entry."""
        if self._tid is None:
            tid, lane, warp = (self.regs.fixed(r, "b32") for r in ("%tgtid", "%tglane", "%tgwarp"))
            self._tid = (tid, lane, warp)
        return self._tid

    def prologue(self) -> list[str]:
        if self._tid is None:
            return []
        tid, lane, warp = self._tid
        return [
            f"\t.reg .b32 \t{tid}, {lane}, {warp};",
            f"\tmov.u32 {tid}, %tid.x;",
            f"\tand.b32 {lane}, {tid}, {WARP - 1};",
            f"\tshr.u32 {warp}, {tid}, 5;",
        ]

    def base(self, d: Dist) -> list:
        """Per root dim: base_d(tid) as a register, or 0 when the dim is not spread."""
        key = d.root
        if key in self._base:
            return self._base[key]
        with self.hoisted():
            return self._base_uncached(d)

    def _base_uncached(self, d: Dist) -> list:
        key = d.root
        _, lane, warp = self.tid()
        lay = d.root
        lsh = wsh = 0
        lane_d: dict = {}
        warp_d: dict = {}
        for dim in lay.order:
            tpw, wpc = lay.threads_per_warp[dim], lay.warps_per_cta[dim]
            for src, sh, n, out in ((lane, lsh, tpw, lane_d), (warp, wsh, wpc, warp_d)):
                if n == 1:
                    out[dim] = None
                    continue
                full = WARP if src is lane else self.num_warps
                if sh == 0 and n >= full and (src is lane or not self.producer_warps):
                    out[dim] = src
                    continue
                r = self.new("b32")
                if sh:
                    self.ins(f"shr.u32 {r}, {src}, {sh}")
                    self.ins(f"and.b32 {r}, {r}, {n - 1}")
                else:
                    self.ins(f"and.b32 {r}, {src}, {n - 1}")
                out[dim] = r
            lsh += lay.threads_per_warp[dim].bit_length() - 1
            wsh += lay.warps_per_cta[dim].bit_length() - 1
        bases: list = []
        for dim in range(lay.rank):
            tpw, spt = lay.threads_per_warp[dim], lay.size_per_thread[dim]
            ln, wp = lane_d[dim], warp_d[dim]
            if ln is None and wp is None:
                bases.append(0)
                continue
            b = self.new("b32")
            if wp is not None and ln is not None:
                self.ins(f"mad.lo.s32 {b}, {wp}, {tpw}, {ln}")
            elif wp is not None:
                self.ins(f"mul.lo.s32 {b}, {wp}, {tpw}")
            else:
                self.ins(f"mov.u32 {b}, {ln}")
            if spt != 1:
                self.ins(f"shl.b32 {b}, {b}, {spt.bit_length() - 1}")
            bases.append(b)
        self._base[key] = bases
        return bases

    def coord(self, d: Dist, k: int, i: int):
        """Coordinate along result dim ``i`` of register ``k``: an int or a b32 register."""
        key = (d.layout, d.shape, k, i)
        if key in self._coord:
            return self._coord[key]
        with self.hoisted():
            return self._coord_uncached(d, k, i, key)

    def _coord_uncached(self, d: Dist, k: int, i: int, key):
        rd = d.kept[i]
        raw = d.raw[k][rd]
        b = self.base(d)[rd]
        size = d.pshape[rd]
        if b == 0:
            out = raw % size
        else:
            r = self.new("b32")
            if raw:
                self.ins(f"add.s32 {r}, {b}, {raw}")
            else:
                r = b
            if d.wraps(rd, k):
                m = self.new("b32")
                self.ins(f"and.b32 {m}, {r}, {size - 1}")
                r = m
            elif isinstance(b, str) and b.startswith("%"):  # codegen/affine.py
                self.affine.setdefault(r, (b, raw, True))
            out = r
        self._coord[key] = out
        return out

    def coords(self, d: Dist, k: int) -> list:
        return [self.coord(d, k, i) for i in range(len(d.kept))]

    def canonical(self, d: Dist, k: int) -> Optional[str]:
        """A predicate true in the one thread whose register ``k`` is the canonical copy of its
        element, or None when every copy is canonical."""
        conds = []
        bases = self.base(d)
        for rd in range(d.root.rank):
            b = bases[rd]
            raw = d.raw[k][rd]
            if b == 0:
                if raw >= d.pshape[rd]:
                    return "0"  # never canonical (static)
                continue
            if d.max_base[rd] + raw >= d.pshape[rd]:
                conds.append((b, d.pshape[rd] - raw))
        if not conds:
            return None
        p = None
        for b, lim in conds:
            q = self.new("pred")
            self.ins(f"setp.lt.u32 {q}, {b}, {lim}")
            if p is not None:
                self.ins(f"and.pred {q}, {q}, {p}")
            p = q
        return p

    # ----- index values (b32 / b64; see the module docstring)
    def reg_class(self, x) -> Optional[str]:
        """Class of register ``x``; None for an immediate."""
        return self.regs.class_of(x)

    def index_class(self, *xs) -> str:
        """``b64`` when any of the index operands ``xs`` is a 64-bit register, else ``b32``."""
        return "b64" if any(self.regs.class_of(x) == "b64" for x in xs) else "b32"

    def as_index(self, x, cls: str):
        """Index ``x`` (an int, a b16, b32 or b64 register) in class ``cls``: ints unchanged, a
        narrower register sign-extended (``cvt.s64.s32``, ...), a b64 one truncated
        (``cvt.u32.u64``)."""
        have = self.regs.class_of(x)
        if have is None or have == cls:
            return x
        cvt = {
            ("b32", "b64"): "cvt.s64.s32",
            ("b64", "b32"): "cvt.u32.u64",
            ("b16", "b32"): "cvt.s32.s16",  # an i8 / i16 index
            ("b16", "b64"): "cvt.s64.s16",
        }.get((have, cls))
        if cvt is None:
            raise CodegenError(
                [Diagnostic("error", f"PTX backend: internal error: {x} ({have}) as a {cls} index")]
            )
        r = self.new(cls)
        self.ins(f"{cvt} {r}, {x}")
        return r

    def lincomb(self, const: int, terms, cls: Optional[str] = None) -> object:
        """``const + sum(m * x)`` over (multiplier, operand) terms; operands are ints or b32 / b64
        registers. Computed in ``cls`` (default: the widest operand class; narrower operands
        are converted explicitly). Returns an int when everything is static."""
        cls = cls or self.index_class(*(x for m, x in terms if m))
        wide = cls == "b64"
        s, b = ("s64", "b64") if wide else ("s32", "b32")
        acc = None
        for m, x in terms:
            if m == 0:
                continue
            if isinstance(x, int):
                const += m * x
                continue
            x = self.as_index(x, cls)
            if acc is None:
                if m == 1:
                    acc = x
                    continue
                acc = self.new(cls)
                if m > 0 and m & (m - 1) == 0:
                    self.ins(f"shl.{b} {acc}, {x}, {m.bit_length() - 1}")
                else:
                    self.ins(f"mul.lo.{s} {acc}, {x}, {m}")
            else:
                n = self.new(cls)
                if m == 1:
                    self.ins(f"add.{s} {n}, {x}, {acc}")
                else:
                    self.ins(f"mad.lo.{s} {n}, {x}, {m}, {acc}")
                acc = n
        if acc is None:
            return const
        if const:
            n = self.new(cls)
            self.ins(f"add.{s} {n}, {acc}, {const}")
            acc = n
        return acc

    def lt_u(self, x, bound) -> str:
        """A predicate ``0 <= x < bound`` (x, bound: index ints or registers; compared unsigned,
        so a negative x is out of range), in the wider class of the two."""
        cls = self.index_class(x, bound)
        p = self.new("pred")
        x, bound = self.as_index(x, cls), self.as_index(bound, cls)
        if isinstance(x, int):
            x = self.mov(cls, x)
        self.ins(f"setp.lt.u{64 if cls == 'b64' else 32} {p}, {x}, {bound}")
        return p

    # ----- shared memory
    def smem_base(self) -> str:
        """A b32 register holding the shared address of the kernel's scratch buffer (after
        :meth:`scratch_into_ring`, of the async loop's idle stage ring)."""
        if self.ring_scratch is not None:
            return self.ring_scratch.reg
        if self._smem_reg is None:
            self._smem_reg = self.regs.fixed("%tgsmem", "b32")
        return self._smem_reg

    def scratch_in_use(self) -> int:
        """Bytes of the scratch buffer claimed so far (exchange.claim_scratch's fresh top)."""
        return self.ring_scratch.used if self.ring_scratch is not None else self.smem_bytes

    def scratch_into_ring(self, symbol: str, limit: int, fence: bool = True) -> None:
        """From here on (the kernel's top level, right after an async K loop) scratch claims
        live in the loop's stage ring, ``limit`` bytes from ``symbol``: the stages are idle
        once every consumer is past the loop, so the epilogue's exchanges (a 128 x 128 f32
        accumulator's 64 KB) need no shared memory of their own. The consumers' barrier (after
        a proxy fence: the ring was last read by wgmma / tcgen05 and written by TMA) goes in
        here once a claim uses the ring; :meth:`finish_ring_scratch` says whether they fit."""
        if not self.ring_scratch_allowed or self.ring_scratch is not None:
            return
        if self.ring_pre is not None:
            self._smem_refs = {}
        start = len(self.body)
        if fence:  # (``fence``: the ring's last accesses include the async proxy's)
            self.ins("fence.proxy.async.shared::cta")
        self.barrier()
        lines = self.body[start:]
        del self.body[start:]
        self.body.append(_RING_MARK)
        reg = self.regs.fixed("%tgring", "b32")
        self.ring_scratch = RingScratch(reg, symbol, limit, lines)
        self._smem_refs = {}  # (addresses cached from the old base)

    def scratch_before_ring(self, symbol: str) -> None:
        """From the kernel's start, scratch claims live in the stage ring of the async K loop
        the kernel's top level holds (``symbol``): nothing writes the ring before the loop's
        frame, whose CTA-wide barrier (after a proxy fence, :meth:`ring_ready`) orders these
        claims' last reads before the producer's first copy. The prologue's exchanges (a kept
        Q's 64 KB reshape) then need no shared memory of their own."""
        if self.ring_pre_allowed and self.ring_scratch is None:
            self.ring_scratch = RingScratch(self.regs.fixed("%tgring", "b32"), symbol, 0, [])

    def ring_ready(self, limit: int) -> bool:
        """The async loop's frame, before its CTA-wide barrier: the claims before it end (the
        kernel's own scratch from here), ``limit`` bytes of stages were theirs; True when they
        used the ring (the caller fences the proxies before the barrier)."""
        rs = self.ring_scratch
        if rs is None or self.ring_pre is not None or rs.lines:
            return False
        rs.limit = limit
        self.ring_pre, self.ring_scratch = rs, None
        self._smem_refs = {}
        return rs.used > 0

    def finish_ring_scratch(self) -> Optional[str]:
        """After the kernel's body: the ring mark becomes the barrier (or goes). None when the
        ring's claims fit; "pre" / "post" when the claims before / after the loop outgrew its
        idle stages (the caller emits again without)."""
        pre, rs = self.ring_pre, self.ring_scratch
        if rs is not None and not rs.lines:  # claims from the start but no frame came
            return "pre" if rs.used else None
        if pre is not None and pre.used > pre.limit:
            return "pre"
        if rs is not None:
            i = self.body.index(_RING_MARK)
            if rs.used > rs.limit:
                return "post"
            self.body[i : i + 1] = rs.lines if rs.used else []
        used = [r for r in (pre, rs) if r is not None and r.used]
        if used:  # the ring's address, right after its declaration (hoisted uses follow)
            r = used[0]
            at = next(j for j, x in enumerate(self.pre) if f" {r.symbol}[" in x) + 1
            self.pre[at:at] = [f"\t.reg .b32 \t{r.reg};", f"\tmov.u32 {r.reg}, {r.symbol};"]
        return None

    def need_isa(self, version: str) -> None:
        """Record that an emitted instruction needs PTX ISA ``version`` (e.g. "8.4")."""
        major, minor = (int(x) for x in version.split("."))
        self.isa = max(self.isa, (major, minor))

    def need_target_suffix(self, suffix: str) -> None:
        """Record that an emitted instruction needs ``.target sm_XX<suffix>`` (e.g. "a" for
        wgmma on sm_90a)."""
        self.target_suffix = suffix

    def need_smem(self, nbytes: int) -> None:
        if self.ring_scratch is not None:
            self.ring_scratch.used = max(self.ring_scratch.used, nbytes)
        else:
            self.smem_bytes = max(self.smem_bytes, nbytes)

    def smem_ref(self, d: Dist, form, k: int, esize: int, byte_off: int = 0) -> str:
        """``[reg+imm]`` shared operand of element ``form(coords of register k)``: the thread
        part is computed once per (layout, form) at the kernel entry, the register's constant
        offset is an immediate (registers whose coordinates wrap take the general path)."""
        if any(m and d.wraps(d.kept[i], k) for i, m in enumerate(form.mults)):
            idx = form.emit(self, d, k)
            return f"[{self.smem_addr(idx, esize)}+{byte_off}]"
        key = (d.layout, d.shape, tuple(form.mults), esize)
        if key not in self._smem_refs:
            with self.hoisted():
                bases = self.base(d)
                tp = self.lincomb(0, [(m, bases[d.kept[i]]) for i, m in enumerate(form.mults)])
                self._smem_refs[key] = self.smem_addr(tp, esize)
        static = form.const + sum(m * d.raw[k][d.kept[i]] for i, m in enumerate(form.mults))
        return f"[{self._smem_refs[key]}+{static * esize + byte_off}]"

    def smem_addr(self, index, esize: int) -> str:
        """Shared address of element ``index`` (an int or index register; 64-bit ones are
        narrowed) of ``esize`` bytes."""
        index = self.as_index(index, "b32")
        base = self.smem_base()
        if isinstance(index, int):
            if index == 0:
                return base
            r = self.new("b32")
            self.ins(f"add.s32 {r}, {base}, {index * esize}")
            return r
        r = self.new("b32")
        self.ins(f"mad.lo.s32 {r}, {index}, {esize}, {base}")
        return r

    def barrier(self) -> None:
        if self.barrier_threads:  # the kernel's warps without the async producer warp group
            self.ins(f"bar.sync 1, {self.barrier_threads}")
        else:
            self.ins("bar.sync 0")

    def pipe_region(self, nbytes: int) -> str:
        """A b32 register holding the shared address of the region for pipelined K-loop stage
        buffers (control.py), ``nbytes`` at least: a second ``.shared`` array beside the
        scratch, so nothing else in the loop body can overwrite a prefetched stage. One region
        serves every pipelined loop of the kernel (each drains its copies and barriers at its
        end; loops are never pipelined inside one another)."""
        decl = f"\t.shared .align 128 .b8 {PIPE_SYMBOL}[{{}}];"
        if self.pipe_bytes == 0:
            self._pipe_reg = self.new("b32")
            self.pre.insert(0, decl.format(nbytes))
            self.pre.insert(1, f"\tmov.u32 {self._pipe_reg}, {PIPE_SYMBOL};")
        elif nbytes > self.pipe_bytes:
            i = self.pre.index(decl.format(self.pipe_bytes))
            self.pre[i] = decl.format(nbytes)
        self.pipe_bytes = max(self.pipe_bytes, nbytes)
        return self._pipe_reg

    def resident_region(self, nbytes: int, name: str = "keep", align: int = 128) -> str:
        """A b32 register holding the shared address of a new ``.shared`` array of ``nbytes``
        that nothing else uses (a dot operand kept across a loop's iterations; a row vector an
        epilogue reads by chunks: ``tmem_resident.Epilogue``)."""
        n = sum(f".b8 __tilegen_{name}" in x for x in self.pre)
        sym = f"__tilegen_{name}{n}"
        reg = self.new("b32")
        self.pre.insert(0, f"\t.shared .align {align} .b8 {sym}[{nbytes}];")
        self.pre.insert(1, f"\tmov.u32 {reg}, {sym};")
        self.resident_bytes += (nbytes + align - 1) // align * align
        return reg

    def smem_prologue(self) -> list[str]:
        out = []
        if self._smem_reg is not None:
            out += [
                f"\t.reg .b32 \t{self._smem_reg};",
                f"\tmov.u32 {self._smem_reg}, {SMEM_SYMBOL};",
            ]
        return out


def store_reg(em: Emitter, cls: str, reg: str) -> tuple[str, str]:
    """(register, st/ld type) to move a value of register class ``cls`` through memory;
    predicates travel as u16 0/1."""
    if cls == "pred":
        r = em.new("b16")
        em.ins(f"selp.u16 {r}, 1, 0, {reg}")
        return r, "u8"
    return reg, {"b16": "b16", "b32": "b32", "b64": "b64", "f32": "f32", "f64": "f64"}[cls]


def load_reg(em: Emitter, cls: str, space: str, addr: str, pred: Optional[str] = None) -> str:
    """Load a value of register class ``cls`` from ``[addr]`` in ``space`` (guarded by
    ``pred`` if given; the result is then undefined where the guard is false)."""
    guard = f"@{pred} " if pred else ""
    if cls == "pred":
        t = em.new("b16")
        if pred:
            em.ins(f"mov.u16 {t}, 0")
        em.ins(f"{guard}ld.{space}.u8 {t}, [{addr}]")
        p = em.new("pred")
        em.ins(f"setp.ne.u16 {p}, {t}, 0")
        return p
    r = em.new(cls)
    em.ins(f"{guard}ld.{space}.{cls} {r}, [{addr}]")
    return r
