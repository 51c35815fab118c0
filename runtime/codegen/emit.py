"""Walk one nv_tileas-stage kernel and print PTX text.

Supported (what vec_add-like kernels need): get_program_id, scalar arith.constant / addi / subi /
muli on i32, assume and mem tokens (no-ops), make_memref, tiled_load / tiled_store through a
memref (masked on dims not ``in_bounds``), and the elementwise ops of :mod:`selection`. Anything
else is a located ``PTX backend does not support 'OP' yet`` diagnostic.
"""

from __future__ import annotations

from tilegen.runtime.codegen.abi import entry_params
from tilegen.runtime.codegen.addressing import split_layout
from tilegen.runtime.codegen.regs import RegAlloc
from tilegen.runtime.codegen.selection import ROUND_NEAREST_EVEN, select
from tilegen.runtime.diagnostics import Diagnostic
from tilegen.runtime.types import (
    DYNAMIC,
    FloatType,
    IntegerType,
    MemTokenType,
    NvMemRefType,
    NvPointerType,
    TileType,
)

PTX_VERSION = "8.0"
#: the least PTX ISA that knows ``.target sm_XX`` where that is newer than PTX_VERSION
MIN_ISA = {100: "8.6", 101: "8.6", 103: "8.8", 110: "9.0", 120: "8.7", 121: "8.8"}
WARP = 32


class CodegenError(Exception):
    def __init__(self, diagnostics):
        super().__init__(diagnostics[0].message if diagnostics else "codegen failed")
        self.diagnostics = diagnostics


def _fail(op, message=None):
    message = message or f"PTX backend does not support '{op.name}' yet"
    raise CodegenError([Diagnostic("error", message, op.loc)])


#: element type -> (register class, ld/st type, byte size, zero literal)
ELEMENTS = {
    "f32": ("f32", "f32", 4, "0f00000000"),
    "i32": ("b32", "b32", 4, "0"),
}


def _elem_name(t) -> str | None:
    if isinstance(t, FloatType):
        return t.name
    if isinstance(t, IntegerType):
        return f"i{t.width}"
    return None


class Memref:
    def __init__(self, ptr, sizes, strides, element, address_space):
        self.ptr, self.sizes, self.strides, self.element = ptr, sizes, strides, element
        self.address_space = address_space


class KernelEmitter:
    def __init__(self, func, num_warps: int):
        self.func = func
        self.num_warps = num_warps
        self.regs = RegAlloc()
        self.body: list[str] = []
        self.values: dict = {}
        self._tid_base: dict = {}

    def ins(self, text: str) -> None:
        self.body.append("\t" + text + ";")

    def new(self, cls: str) -> str:
        return self.regs.new(cls)

    # ----- scalars
    def scalar(self, op, v) -> str:
        r = self.values.get(v)
        if not isinstance(r, str):
            _fail(op, f"PTX backend: operand of '{op.name}' is not a supported scalar")
        return r

    # ----- thread coordinates
    def tid_base(self, layout) -> list[str]:
        """Per-dim registers with base_d(tid) (see addressing.split_layout)."""
        if layout in self._tid_base:
            return self._tid_base[layout]
        if "tid" not in self._tid_base:
            tid, lane, warp = self.new("b32"), self.new("b32"), self.new("b32")
            self.ins(f"mov.u32 {tid}, %tid.x")
            self.ins(f"and.b32 {lane}, {tid}, {WARP - 1}")
            self.ins(f"shr.u32 {warp}, {tid}, 5")
            self._tid_base["tid"] = (lane, warp)
        lane, warp = self._tid_base["tid"]
        lsh = wsh = 0
        lane_d, warp_d = {}, {}
        for d in layout.order:
            tpw, wpc = layout.threads_per_warp[d], layout.warps_per_cta[d]
            for src, sh, n, out in ((lane, lsh, tpw, lane_d), (warp, wsh, wpc, warp_d)):
                if n == 1:
                    out[d] = "0"
                    continue
                r = self.new("b32")
                if sh:
                    self.ins(f"shr.u32 {r}, {src}, {sh}")
                    self.ins(f"and.b32 {r}, {r}, {n - 1}")
                else:
                    self.ins(f"and.b32 {r}, {src}, {n - 1}")
                out[d] = r
            lsh += tpw.bit_length() - 1
            wsh += wpc.bit_length() - 1
        bases = []
        for d in range(layout.rank):
            tpw, spt = layout.threads_per_warp[d], layout.size_per_thread[d]
            b = self.new("b32")
            self.ins(f"mov.u32 {b}, {lane_d[d]}")
            if warp_d[d] != "0":
                self.ins(f"mad.lo.s32 {b}, {warp_d[d]}, {tpw}, {b}")
            if spt != 1:
                self.ins(f"mul.lo.s32 {b}, {b}, {spt}")
            bases.append(b)
        self._tid_base[layout] = bases
        return bases

    # ----- tiled accesses
    def access(self, op, mem: Memref, indices, tile_type: TileType, in_bounds):
        """(address register, predicate register or None) per layout register."""
        layout = tile_type.encoding
        offsets = split_layout(layout, tile_type.shape)
        if offsets is None:
            _fail(op, f"PTX backend does not support the layout of '{op.name}' yet")
        bases = self.tid_base(layout)
        esize = ELEMENTS[mem.element][2]
        starts = []
        for d, idx in enumerate(indices):
            s = self.new("b32")
            self.ins(f"add.s32 {s}, {self.scalar(op, idx)}, {bases[d]}")
            starts.append(s)
        out = []
        for off in offsets:
            addr = self.new("b64")
            self.ins(f"mov.u64 {addr}, {mem.ptr}")
            pred = None
            for d, s in enumerate(starts):
                i = s
                if off[d]:
                    i = self.new("b32")
                    self.ins(f"add.s32 {i}, {s}, {off[d]}")
                if not in_bounds[d]:
                    p = self.new("pred")
                    # unsigned: a negative index is out of bounds too (sizes are < 2**31)
                    self.ins(f"setp.lt.u32 {p}, {i}, {mem.sizes[d]}")
                    if pred is not None:
                        self.ins(f"and.pred {p}, {p}, {pred}")
                    pred = p
                stride = mem.strides[d]
                t = self.new("b64")
                if isinstance(stride, int):
                    self.ins(f"mul.wide.s32 {t}, {i}, {stride * esize}")
                else:
                    m = self.new("b32")
                    self.ins(f"mul.lo.s32 {m}, {i}, {stride}")
                    self.ins(f"mul.wide.s32 {t}, {m}, {esize}")
                self.ins(f"add.s64 {addr}, {addr}, {t}")
            out.append((addr, pred))
        return out

    def _tiled_operands(self, op, has_value: bool):
        mem = self.values.get(op.operands[0])
        if not isinstance(mem, Memref):
            _fail(op, f"PTX backend supports '{op.name}' only through a make_memref")
        rest = [v for v in op.operands[1:] if not isinstance(v.type, MemTokenType)]
        value = None
        if has_value:
            value, rest = rest[0], rest[1:]
        if len(rest) != len(mem.sizes):
            _fail(op, f"PTX backend does not support masked or padded '{op.name}' yet")
        sem = op.attributes.get("mem_semantic")
        hints = ("mem_scope", "volatile", "cache_modifier", "eviction_policy")
        if (sem is not None and sem.value != 0) or any(h in op.attributes for h in hints):
            _fail(op, f"PTX backend supports only weak, unhinted '{op.name}' yet")
        if mem.address_space != 1:
            _fail(op, f"PTX backend supports '{op.name}' only on global memory yet")
        ib = op.attributes.get("in_bounds")
        in_bounds = list(ib.values) if ib is not None else [False] * len(mem.sizes)
        return mem, value, rest, in_bounds

    # ----- ops
    def run(self) -> list[str]:
        block = self.func.regions[0].blocks[0]
        self.params = entry_params(self.symbol, [a.type for a in block.args])
        for arg, (name, ptype) in zip(block.args, self.params):
            if ptype == "u64":
                raw, g = self.new("b64"), self.new("b64")
                self.ins(f"ld.param.u64 {raw}, [{name}]")
                self.ins(f"cvta.to.global.u64 {g}, {raw}")
                self.values[arg] = g
            elif ptype == "u32":
                r = self.new("b32")
                self.ins(f"ld.param.u32 {r}, [{name}]")
                self.values[arg] = r
            else:
                _fail(self.func, f"PTX backend does not support parameters of type {arg.type} yet")
        for op in block.ops:
            self.emit_op(op)
        return self.body

    def emit_op(self, op) -> None:
        name = op.name
        res = op.results[0] if op.results else None
        if name in ("nv_tileaa.create_mem_token",):
            return
        if name == "nv_tileaa.assume":
            self.values[res] = self.values.get(op.operands[0])
            return
        if name == "nv_tileaa.return":
            self.ins("ret")
            return
        if name == "nv_tileaa.get_program_id":
            dim = op.attributes["dim"].value
            r = self.new("b32")
            self.ins(f"mov.u32 {r}, %ctaid.{'xyz'[dim]}")
            self.values[res] = r
            return
        if name == "arith.constant" and isinstance(res.type, IntegerType) and res.type.width == 32:
            r = self.new("b32")
            self.ins(f"mov.u32 {r}, {op.attributes['value'].value}")
            self.values[res] = r
            return
        if name == "nv_tileaa.make_memref":
            return self.make_memref(op)
        if name == "nv_tileaa.tiled_load":
            return self.tiled_load(op)
        if name == "nv_tileaa.tiled_store":
            return self.tiled_store(op)
        if res is not None and len(op.results) == 1 and len(op.operands) == 2:
            return self.elementwise(op)
        _fail(op)

    def make_memref(self, op) -> None:
        t = op.results[0].type
        elem = _elem_name(t.element)
        if not isinstance(t, NvMemRefType) or elem not in ELEMENTS:
            _fail(op, f"PTX backend does not support memrefs of {t.element} yet")
        base = self.values.get(op.operands[0])
        ints = [self.scalar(op, v) for v in op.operands[1:]]
        dyn_sizes = sum(1 for s in t.shape if s == DYNAMIC)
        dyn_strides = sum(1 for s in t.stride_values if s == DYNAMIC)
        if not isinstance(base, str) or len(ints) != dyn_sizes + dyn_strides:
            _fail(op, "PTX backend does not support this 'nv_tileaa.make_memref' form yet")
        it = iter(ints)
        sizes = [next(it) if s == DYNAMIC else str(s) for s in t.shape]
        strides = [next(it) if s == DYNAMIC else s for s in t.stride_values]
        self.values[op.results[0]] = Memref(base, sizes, strides, elem, t.address_space)

    def tiled_load(self, op) -> None:
        mem, _, indices, in_bounds = self._tiled_operands(op, False)
        t = op.results[0].type
        cls, lst, _, zero = ELEMENTS[mem.element]
        regs = []
        for addr, pred in self.access(op, mem, indices, t, in_bounds):
            r = self.new(cls)
            if pred is not None:
                self.ins(f"mov.{lst} {r}, {zero}")
                self.ins(f"@{pred} ld.global.{lst} {r}, [{addr}]")
            else:
                self.ins(f"ld.global.{lst} {r}, [{addr}]")
            regs.append(r)
        self.values[op.results[0]] = regs

    def tiled_store(self, op) -> None:
        mem, value, indices, in_bounds = self._tiled_operands(op, True)
        regs = self.values.get(value)
        if not isinstance(regs, list):
            _fail(op, "PTX backend: stored value of 'nv_tileaa.tiled_store' is not a tile")
        _, lst, _, _ = ELEMENTS[mem.element]
        accesses = self.access(op, mem, indices, value.type, in_bounds)
        for (addr, pred), r in zip(accesses, regs):
            guard = f"@{pred} " if pred is not None else ""
            self.ins(f"{guard}st.global.{lst} [{addr}], {r}")

    def elementwise(self, op) -> None:
        res = op.results[0]
        elem = _elem_name(res.type.element if isinstance(res.type, TileType) else res.type)
        row = select(op.name, elem)
        if row is None:
            _fail(op)
        rm = op.attributes.get("rounding_mode")
        if rm is not None and rm.value != ROUND_NEAREST_EVEN:
            _fail(op, f"PTX backend does not support rounding mode {rm.value} of '{op.name}' yet")
        _, text, cls = row
        a, b = (self.values.get(v) for v in op.operands)
        if isinstance(res.type, TileType):
            if not (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)):
                _fail(op, f"PTX backend does not support these operands of '{op.name}' yet")
            out = []
            for x, y in zip(a, b):
                r = self.new(cls)
                self.ins(f"{text} {r}, {x}, {y}")
                out.append(r)
            self.values[res] = out
        else:
            r = self.new(cls)
            self.ins(
                f"{text} {r}, {self.scalar(op, op.operands[0])}, {self.scalar(op, op.operands[1])}"
            )
            self.values[res] = r


def emit_ptx(root, sm: int) -> str:
    """PTX text for every kernel ``nv_tileaa.func`` of the nv_tileas-stage module ``root``."""
    from tilegen.runtime.passes.layout_assignment import kernel_num_warps

    lines = [
        "//",
        "// Generated by tilegen (runtime/codegen)",
        "//",
        "",
        f".version {MIN_ISA.get(sm, PTX_VERSION)}",
        f".target sm_{sm}",
        ".address_size 64",
        "",
    ]
    funcs = [op for op in root.walk() if op.name == "nv_tileaa.func"]
    for func in funcs:
        for op in func.walk():
            if op is not func and op.regions:
                _fail(op)
        em = KernelEmitter(func, kernel_num_warps(func))
        em.symbol = func.attributes["sym_name"].value
        try:
            body = em.run()
        except ValueError as e:
            raise CodegenError([Diagnostic("error", str(e), func.loc)]) from None
        params = ",\n".join(f"\t.param .{t} {n}" for n, t in em.params)
        lines.append(f".visible .entry {em.symbol}(\n{params}\n)")
        lines.append(f".reqntid {em.num_warps * WARP}, 1, 1")
        lines.append("{")
        lines += em.regs.declarations()
        lines.append("")
        lines += body
        lines.append("}")
        lines.append("")
    return "\n".join(lines)
