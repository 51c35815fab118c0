"""Tile IR bytecode writer: ``cuda_tile.module`` Operation -> bytes at a chosen version.

Instructions are encoded generically from the generated op layouts (the mirror image of the
reader). Strings, types, constants and debug records are interned into their tables while the
functions are encoded; the tables are emitted afterwards, in NVIDIA's section order. Everything
newer than the target version is either omitted (when it holds its default) or refused with
NVIDIA's message.
"""

from __future__ import annotations

from typing import Optional

from tilegen.runtime import types as ty
from tilegen.runtime.asm.dense import element_bits
from tilegen.runtime.asm.float_format import SEMANTICS
from tilegen.runtime.attributes import (
    ArrayAttr,
    BoolAttr,
    BoundedAttr,
    CallSiteLoc,
    DenseArrayAttr,
    DenseElementsAttr,
    DICompileUnitAttr,
    DIFileAttr,
    DILexicalBlockAttr,
    DILocAttr,
    DISubprogramAttr,
    DictAttr,
    DivByAttr,
    EnumAttr,
    FileLineColLoc,
    FloatAttr,
    FusedLoc,
    IntegerAttr,
    NameLoc,
    OpaqueLoc,
    OptimizationHintsAttr,
    SameElementsAttr,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
    UnknownLoc,
)
from tilegen.runtime.limits import deep_stack
from tilegen.runtime.bytecode import layouts as L
from tilegen.runtime.bytecode.errors import BytecodeWriteError
from tilegen.runtime.bytecode.varint import Writer, put_varint
from tilegen.runtime.ir import Operation, Region
from tilegen.runtime.opdef import lookup_enum


def write_bytecode(module: Operation, version: Optional[str] = None) -> bytes:
    """Encode a ``cuda_tile.module`` (or a builtin module holding exactly one) at ``version``."""
    version = version or L.DEFAULT_WRITE_VERSION
    if version not in L.WRITE_VERSIONS:
        lo, hi = L.PRODUCTION_WRITE_VERSIONS[0], L.PRODUCTION_WRITE_VERSIONS[-1]
        raise BytecodeWriteError(
            f"unsupported version requested {version}, must be in range [{lo}, {hi}]", module
        )
    return deep_stack(_Writer(version).write, _tile_module(module))  # runtime/limits.py


def _tile_module(op: Operation) -> Operation:
    if op.name == "cuda_tile.module":
        return op
    if op.name == "builtin.module":
        inner = [o for r in op.regions for b in r.blocks for o in b.ops]
        if len(inner) != 1:
            raise BytecodeWriteError("expected a single CUDA Tile IR module in the MLIR module", op)
        if inner[0].name != "cuda_tile.module":
            raise BytecodeWriteError(
                f"expected a CUDA Tile IR module, but got a {inner[0].name}", inner[0]
            )
        return inner[0]
    raise BytecodeWriteError(f"expected a CUDA Tile IR module, but got a {op.name}", op)


class _Interner:
    """First-use-order table of encoded entries keyed by a hashable identity."""

    def __init__(self) -> None:
        self.index: dict = {}
        self.entries: list[bytes] = []

    def add(self, key, build) -> int:
        idx = self.index.get(key)
        if idx is None:
            data = build()  # may register dependencies first
            idx = self.index.get(key)
            if idx is None:
                idx = len(self.entries)
                self.entries.append(data)
                self.index[key] = idx
        return idx


class _Writer:
    def __init__(self, version: str):
        self.version = version
        self.vt = L.vt(version)
        self.strings = _Interner()
        self.types = _Interner()
        self.constants = _Interner()
        self.debug = _Interner()
        self._nvalues = 0  # values numbered so far in the function, in scope
        #: op name -> _OpPlan: what the op's layout means at this version, worked out once
        self._plans: dict[str, _OpPlan] = {}
        #: id(type) -> (type, type#): skips hashing the (nested, frozen) type on every use
        self._type_ids: dict[int, tuple] = {}
        #: id(DenseElementsAttr) -> (attr, constant#): skips re-encoding a shared constant
        self._constant_ids: dict[int, tuple] = {}
        #: (enum name, value) pairs known to be valid cases available at this version
        self._enum_ok: set = set()

    # ------------------------------------------------------------------ module
    def write(self, module: Operation) -> bytes:
        self._check_module(module)
        body = [o for r in module.regions for b in r.blocks for o in b.ops]
        globals_w = Writer()
        globals_ = [o for o in body if o.name == "cuda_tile.global"]
        globals_w.varint(len(globals_))
        for g in globals_:
            self._write_global(globals_w, g)
        funcs = [o for o in body if o.name == "cuda_tile.entry"]
        func_w = Writer()
        func_w.varint(len(funcs))
        debug_lists: list[list[int]] = []
        for f in funcs:
            self._write_function(func_w, f, debug_lists)
        func_w.align(L.T.SECTIONS["func"]["alignment"], L.ALIGNMENT_BYTE)  # as NVIDIA's writer
        producer = module.attributes.get("producer")
        sections: dict[str, bytes] = {}
        if globals_:
            sections["global"] = globals_w.getvalue()
        sections["func"] = func_w.getvalue()
        if debug_lists:
            sections["debug"] = self._debug_payload(debug_lists)
        if self.constants.entries:
            sections["constant"] = self._table_payload(self.constants.entries, 8, "Q")
        if isinstance(producer, StringAttr) and self.vt >= L.vt(L.T.SECTIONS["producer"]["since"]):
            w = Writer()
            w.varint(self.string(producer.value))
            sections["producer"] = w.getvalue()
        sections["type"] = self._table_payload(self.types.entries, 4, "I")
        sections["string"] = self._table_payload(self.strings.entries, 4, "I")
        out = Writer()
        out.raw(L.MAGIC)
        major, minor = self.vt
        out.u8(major)
        out.u8(minor)
        out.fixed("H", 0)
        for name in L.T.WRITER_SECTION_ORDER:
            if name not in sections:
                continue
            payload = sections[name]
            info = L.T.SECTIONS[name]
            align = info["alignment"]
            out.u8(info["id"] | (0x80 if align else 0))
            out.varint(len(payload))
            if align:
                out.varint(align)
                out.align(align, L.ALIGNMENT_BYTE)
            out.raw(payload)
        out.u8(L.T.SECTIONS["end"]["id"])
        return out.getvalue()

    def _check_module(self, module: Operation) -> None:
        for op in (o for r in module.regions for b in r.blocks for o in b.ops):
            if op.name not in ("cuda_tile.entry", "cuda_tile.global"):
                raise BytecodeWriteError(
                    "only function and global ops are allowed in the body", module, op
                )
        # one walk: the dialect and purity checks fail first wherever they are; the first
        # layout failure (in walk order) is raised once the walk finds none of those
        record_ops = L.T.RECORD_OPS
        layout_error: Optional[BytecodeWriteError] = None
        plans = self._plans
        for op in module.walk():
            name = op.name
            if not name.startswith("cuda_tile."):
                raise BytecodeWriteError(
                    "only ops from the 'cuda_tile' dialect are allowed", module, op
                )
            if name in ("cuda_tile.reduce", "cuda_tile.scan"):
                for inner in op.walk():
                    if inner is op or inner.opdef is None:
                        continue
                    if not (inner.opdef.has_trait("Pure") or inner.opdef.has_trait("ReturnLike")):
                        raise BytecodeWriteError("only pure operations allowed", op, inner)
            if layout_error is not None or op is module or name in record_ops:
                continue
            if name in plans and op.opdef is not None:
                continue
            try:
                self._plan(op)
            except BytecodeWriteError as e:
                layout_error = e
        if layout_error is not None:
            raise layout_error

    def _op_layout(self, op: Operation) -> dict:
        """The op's bytecode layout; refuses ops the format (or the target version) lacks."""
        layout = L.OP_LAYOUTS.get(op.name)
        if layout is None or op.opdef is None:
            raise BytecodeWriteError(
                "operation not supported in bytecode (missing from BytecodeOpcodes.td)", op
            )
        if L.vt(layout["since"]) > self.vt:
            raise BytecodeWriteError(
                f"operation '{op.name}' is not available in bytecode version {self.version}", op
            )
        return layout

    def _plan(self, op: Operation) -> "_OpPlan":
        """The op's :class:`_OpPlan` (raises :meth:`_op_layout`'s errors)."""
        layout = self._op_layout(op)
        plan = self._plans.get(op.name)
        if plan is None:
            plan = self._plans[op.name] = _OpPlan(layout, op.opdef, self.vt)
        return plan

    def _check_enum_case(self, case, what: str, op) -> None:
        """Refuse an enum case newer than the target (``what``: "parameter 'x'" ...)."""
        if L.vt(case.since) > self.vt:
            raise BytecodeWriteError(
                f"enum value for {what} is not available in bytecode version {self.version}", op
            )

    @staticmethod
    def _table_payload(entries: list[bytes], align: int, fmt: str) -> bytes:
        w = Writer()
        w.varint(len(entries))
        w.align(align, L.ALIGNMENT_BYTE)
        offset = 0
        for e in entries:
            w.fixed(fmt, offset)
            offset += len(e)
        for e in entries:
            w.raw(e)
        return w.getvalue()

    # ------------------------------------------------------------------ tables
    def string(self, s: str) -> int:
        return self.strings.add(("s", s), lambda: s.encode("utf-8", errors="surrogateescape"))

    def type(self, t: ty.Type, op: Optional[Operation] = None) -> int:
        hit = self._type_ids.get(id(t))
        if hit is not None:
            return hit[1]
        idx = self.types.add(t, lambda: self._encode_type(t, op))
        self._type_ids[id(t)] = (t, idx)  # holds t: its id stays unique while cached
        return idx

    def _encode_type(self, t: ty.Type, op) -> bytes:
        w = Writer()
        if isinstance(t, (ty.IntegerType, ty.FloatType)):
            entry = L.T.ELEMENT_TAGS.get(t.name)
            if entry is None:
                what = (
                    "unsupported integer type width"
                    if isinstance(t, ty.IntegerType)
                    else (f"unsupported float type: {t.name}")
                )
                raise BytecodeWriteError(what, op)
            tag, since = entry[0], entry[1]
            if L.vt(since) > self.vt:
                raise BytecodeWriteError(
                    f"type '{L.element_diag_name(t.name)}' requires bytecode version {since}+, "
                    f"targeting {self.version}",
                    op,
                )
            w.varint(tag)
            return w.getvalue()
        name = L.DIALECT_BY_CLASS.get(type(t).__name__)
        if name is None:
            raise BytecodeWriteError("unsupported type in bytecode writer", op)
        info = L.T.DIALECT_TYPES[name]
        if L.vt(info["since"]) > self.vt:
            raise BytecodeWriteError(
                f"type '{info['diag_name']}' requires bytecode version {info['since']}+, "
                f"targeting {self.version}",
                op,
            )
        params = info["params"]
        values = {p["name"]: getattr(t, p["field"], None) if "field" in p else None for p in params}
        optional = []
        for p in params:
            if not p.get("optional"):
                continue
            if L.vt(p.get("since", "13.1")) > self.vt:
                if values[p["name"]] is not None:
                    raise BytecodeWriteError(
                        f"parameter '{p['name']}' requires bytecode version {p['since']}+, but "
                        f"targeting {self.version}",
                        op,
                    )
                continue
            optional.append(p)
        unified = L.unified_bitfield(self.version)
        body = Writer()
        if optional and unified:
            flags = 0
            for i, p in enumerate(optional):
                if values[p["name"]] is not None:
                    flags |= 1 << i
            body.varint(flags)
        for p in params:
            value = values[p["name"]]
            if p.get("optional"):
                if p not in optional:
                    continue
                if not unified:
                    body.u8(1 if value is not None else 0)
                if value is None:
                    continue
            self._write_param(body, p, value, op)
        w.varint(info["tag"])
        w.raw(body.getvalue())
        return w.getvalue()

    def _write_param(self, w: Writer, p: dict, value, op) -> None:
        enc = p["enc"]
        if enc == "type":
            w.varint(self.type(value, op))
        elif enc == "type_list":
            idx = [self.type(v, op) for v in value]
            w.varint(len(idx))
            for i in idx:
                w.varint(i)
        elif enc == "i64_array":
            w.le_array("q", value)
        elif enc == "i32_array":
            w.le_array("i", value)
        elif enc == "u32":
            w.varint(value)
        elif enc == "enum":
            ed = lookup_enum(p["enum"])
            v = ed.value(value) if isinstance(value, str) else L.enum_value(p["enum"], value)
            if v is None:
                raise BytecodeWriteError(f"invalid value for parameter '{p['name']}'", op)
            case = next(k for k in ed.cases if k.value == v)  # per-case version (PtrAttr 13.5)
            self._check_enum_case(case, f"parameter '{p['name']}'", op)
            w.varint(v)

    def constant(self, attr, op, name: str = "value") -> int:
        if not isinstance(attr, DenseElementsAttr):
            raise BytecodeWriteError(
                f"failed to add constant attribute '{name}' to pool: {attr}", op
            )
        hit = self._constant_ids.get(id(attr))
        if hit is not None:
            return hit[1]
        blob = encode_dense(attr, op)
        idx = self.constants.add(("c", blob), lambda: blob)
        self._constant_ids[id(attr)] = (attr, idx)  # holds attr: its id stays unique
        return idx

    # ------------------------------------------------------------------ globals
    def _write_global(self, w: Writer, g: Operation) -> None:
        name = g.attributes["sym_name"].value
        value = g.attributes.get("value")
        alignment = g.attributes.get("alignment")
        vis = g.attributes.get("symbol_visibility") or g.attributes.get("sym_visibility")
        vis_value = L.enum_value("SymbolVisibility", vis) if vis is not None else 0
        is_const = "constant" in g.attributes
        if not L.unified_bitfield(self.version):
            if vis_value:
                raise BytecodeWriteError(
                    f"global `{name}` uses non-public symbol visibility, which cannot be encoded "
                    f"in bytecode version {self.version} (requires bytecode 13.3+)",
                    g,
                )
            if is_const:
                raise BytecodeWriteError(
                    f"constant global `{name}` cannot be encoded in bytecode version "
                    f"{self.version} (the `constant` attribute requires bytecode 13.3+)",
                    g,
                )
        w.varint(self.string(name))
        w.varint(self.type(value.type, g))
        w.varint(self.constant(value, g))
        w.varint(alignment.value & (2**64 - 1) if isinstance(alignment, IntegerAttr) else 0)
        if L.unified_bitfield(self.version):
            w.varint(vis_value or 0)
            w.varint(1 if is_const else 0)

    # ------------------------------------------------------------------ functions
    def _write_function(self, w: Writer, f: Operation, debug_lists: list) -> None:
        name = f.attributes["sym_name"].value
        sig = f.attributes["function_type"].value
        hints = f.attributes.get("optimization_hints")
        v2 = self.vt >= L.vt(L.T.FUNCTION_RECORD_V2_SINCE)
        flags = L.T.FUNCTION_FLAGS["entry"]
        if v2 and hints is None:
            hints = OptimizationHintsAttr(())
        elif hints is not None and not v2:
            flags |= L.T.FUNCTION_FLAGS["has_hints"]
        locs: Optional[list[int]] = None
        if isinstance(f.loc, (DILocAttr, CallSiteLoc)):
            locs = [self.loc(f.loc, f)]
            debug_lists.append(locs)
            loc_index = len(debug_lists)
        else:
            self._check_loc(f.loc, f)
            loc_index = 0
        w.varint(self.string(name))
        w.varint(self.type(sig, f))
        w.u8(flags)
        w.varint(loc_index)
        if hints is not None:
            self._sc_attr(w, hints, f, "optimization_hints")
        if v2:
            self._sc_attr(w, ArrayAttr(()), f, "arg_attrs")  # argument dictionaries (not modelled)
        body = Writer()
        values: dict = {}  # value -> its number (values in scope only)
        self._nvalues = 0  # values numbered so far, in scope
        block = f.regions[0].blocks[0] if f.regions and f.regions[0].blocks else None
        if block is not None:
            for a in block.args:
                values[a] = self._nvalues
                self._nvalues += 1
            for op in block.ops:
                self._write_op(body, op, values, locs)
        w.varint(len(body))
        w.raw(body.getvalue())

    # ------------------------------------------------------------------ locations
    def _check_loc(self, loc, op) -> None:
        if type(loc) in _PLAIN_LOCS:
            return
        if isinstance(loc, CallSiteLoc):
            self._check_loc(loc.callee, op)
            self._check_loc(loc.caller, op)
        elif not isinstance(loc, (DILocAttr, FileLineColLoc, UnknownLoc)):
            kind = {FusedLoc: "FusedLoc", NameLoc: "NameLoc", OpaqueLoc: "OpaqueLoc"}.get(
                type(loc), "Unknown Attribute"
            )
            raise BytecodeWriteError(
                f"unsupported location, got {kind}, expected DILocAttr or CallSiteLoc", op
            )

    def loc(self, loc, op) -> int:
        """di# of an op location (0 for unknown / plain file locations)."""
        self._check_loc(loc, op)
        return self.di(loc, op)

    def di(self, attr, op) -> int:
        if attr is None or isinstance(attr, (UnknownLoc, FileLineColLoc)):
            return 0
        return self.debug.add(("d", attr), lambda: self._encode_di(attr, op)) + 1

    def _encode_di(self, a, op) -> bytes:
        w = Writer()
        tags = L.DEBUG_TAGS
        if isinstance(a, DILocAttr):
            scope = self.di(a.scope, op)
            w.varint(tags["DILocAttr"])
            w.varint(scope)
            w.varint(self.string(a.source.file))
            w.varint(a.source.line)
            w.varint(a.source.col)
        elif isinstance(a, CallSiteLoc):
            callee, caller = self.di(a.callee, op), self.di(a.caller, op)
            w.varint(tags["CallSiteLoc"])
            w.varint(callee)
            w.varint(caller)
        elif isinstance(a, DISubprogramAttr):
            file, cu = self.di(a.file, op), self.di(a.compile_unit, op)
            w.varint(tags["DISubprogramAttr"])
            w.varint(file)
            w.varint(a.line)
            w.varint(self.string(a.name))
            w.varint(self.string(a.linkage_name))
            w.varint(cu)
            w.varint(a.scope_line or 0)
            if self.vt >= L.vt(L.T.SUBPROGRAM_FLAGS_SINCE):
                w.varint(a.flags)
        elif isinstance(a, DIFileAttr):
            w.varint(tags["DIFileAttr"])
            w.varint(self.string(a.name))
            w.varint(self.string(a.directory))
        elif isinstance(a, DICompileUnitAttr):
            file = self.di(a.file, op)
            w.varint(tags["DICompileUnitAttr"])
            w.varint(file)
        elif isinstance(a, DILexicalBlockAttr):
            scope, file = self.di(a.scope, op), self.di(a.file, op)
            w.varint(tags["DILexicalBlockAttr"])
            w.varint(scope)
            w.varint(file)
            w.varint(a.line)
            w.varint(a.column or 0)
        else:
            raise BytecodeWriteError("failed to serialize debug info attribute", op)
        return w.getvalue()

    def _debug_payload(self, lists: list[list[int]]) -> bytes:
        w = Writer()
        w.varint(len(lists))
        w.align(4, L.ALIGNMENT_BYTE)
        start = 0
        for lst in lists:
            w.fixed("I", start)
            start += len(lst)
        w.varint(start)
        w.align(8, L.ALIGNMENT_BYTE)
        for lst in lists:
            for idx in lst:
                w.fixed("Q", idx)
        # w is 8-byte aligned here, so the attribute table keeps its own alignment
        w.raw(self._table_payload(self.debug.entries, 4, "I"))
        return w.getvalue()

    # ------------------------------------------------------------------ instructions
    def _write_op(self, w: Writer, op: Operation, values: dict, locs) -> None:
        plan = self._plans.get(op.name)
        if plan is None or op.opdef is None:
            plan = self._plan(op)  # refuses ops the format (or the target version) lacks
        opdef = op.opdef
        loc = op.loc
        if locs is not None:
            locs.append(self.loc(loc, op))
        elif type(loc) not in _PLAIN_LOCS:
            self._check_loc(loc, op)
        buf = w.buf
        buf += plan.opcode
        # results: those whose definition exists in the target version
        results = op.results
        if (
            len(results) == plan.simple_results
            and "resultSegmentSizes" not in op.attributes
            and not op.properties
        ):
            serialized = results  # one result per (single, available) definition
        else:
            serialized = []
            for d, (start, n) in zip(opdef.results, opdef.result_segments(op)):
                group = results[start : start + n]
                if L.vt(d.since) > self.vt:
                    if any(r.has_uses for r in group):
                        raise BytecodeWriteError(
                            f"result '{d.name}' requires bytecode version {d.since} but is being "
                            f"used and targeting {self.version}. Cannot serialize to older "
                            "bytecode version when newer features are used.",
                            op,
                        )
                    continue
                serialized.extend(group)
        if plan.result_count:
            put_varint(buf, len(serialized))
        type_ids = self._type_ids
        for r in serialized:
            t = r.type
            hit = type_ids.get(id(t))
            idx = hit[1] if hit is not None else self.type(t, op)
            if idx < 0x80:
                buf.append(idx)
            else:
                put_varint(buf, idx)
        # flags
        attributes = op.attributes
        segs = None
        if plan.flags:
            flags = 0
            for i, name, is_attr, newer, since in plan.flags:
                if is_attr:
                    present, what = name in attributes, "optional attribute"
                else:
                    if segs is None:
                        segs = dict(zip(plan.operand_names, opdef.operand_segments(op)))
                    present, what = segs.get(name, (0, 0))[1] > 0, "optional operand"
                if present:
                    if newer:
                        raise BytecodeWriteError(
                            f"{what} '{name}' is provided but requires bytecode version "
                            f"{since}, targeting {self.version}",
                            op,
                        )
                    flags |= 1 << i
            if plan.write_flags:
                put_varint(buf, flags)
        # attributes
        for a, name, newer, skip_absent, enc, default in plan.attrs:
            value = attributes.get(name)
            if newer:
                if value is not None and not L.is_default(a, value):
                    raise BytecodeWriteError(
                        f"attribute '{name}' requires bytecode version {a['since']}+, but "
                        f"targeting {self.version}",
                        op,
                    )
                continue
            if value is None:
                if skip_absent:
                    continue
                value = default
                if value is None and enc == "bool_array":
                    value = DenseArrayAttr(ty.I1, (False,) * self._index_count(op, opdef))
                if value is None:
                    raise BytecodeWriteError(f"missing required attribute '{name}'", op)
            elif enc == "flag":
                continue
            if enc == "enum" and type(value) in _ENUM_VALUE_ATTRS:
                v = value.value
                if (a["enum"], v) in self._enum_ok:
                    put_varint(buf, v)
                    continue
            self._inline_attr(w, a, value, op)

        # operands
        enc = plan.operands
        if enc == "fixed" or enc == "counted":
            operands = op.operands
            if enc == "counted":
                put_varint(buf, len(operands))
            get = values.get
            for v in operands:
                idx = get(v)
                if idx is None:
                    raise BytecodeWriteError("operand does not dominate its use", op)
                if idx < 0x80:
                    buf.append(idx)
                elif idx < 0x4000:
                    buf.append(idx & 0x7F | 0x80)
                    buf.append(idx >> 7)
                else:
                    put_varint(buf, idx)
        else:
            if segs is None:
                segs = dict(zip(plan.operand_names, opdef.operand_segments(op)))
            for d in opdef.operands:
                start, n = segs[d.name]
                group = op.operands[start : start + n]
                if d.kind == "variadic":
                    put_varint(buf, n)
                for v in group:
                    idx = values.get(v)
                    if idx is None:
                        raise BytecodeWriteError("operand does not dominate its use", op)
                    put_varint(buf, idx)
        # regions
        if plan.regions:
            put_varint(buf, len(op.regions))
            for region in op.regions:
                self._write_region(w, region, values, locs)
        n = self._nvalues
        for r in serialized:
            values[r] = n
            n += 1
        self._nvalues = n

    @staticmethod
    def _index_count(op: Operation, opdef) -> int:
        for d, (start, n) in zip(opdef.operands, opdef.operand_segments(op)):
            if d.name == "index":
                return n
        return 0

    def _write_region(self, w: Writer, region: Region, values, locs) -> None:
        w.varint(len(region.blocks))
        for block in region.blocks:
            mark = self._nvalues
            w.varint(len(block.args))
            for a in block.args:
                w.varint(self.type(a.type))
            for a in block.args:
                values[a] = self._nvalues
                self._nvalues += 1
            w.varint(len(block.ops))
            for op in block.ops:
                self._write_op(w, op, values, locs)
            # the block's values go out of scope: its arguments and its ops' results (the
            # values of nested blocks went when those ended)
            for a in block.args:
                values.pop(a, None)
            for op in block.ops:
                for r in op.results:
                    values.pop(r, None)
            self._nvalues = mark

    # ------------------------------------------------------------------ attributes
    def _inline_attr(self, w: Writer, a: dict, value, op) -> None:
        enc, name = a["enc"], a["name"]
        if enc == "enum":
            v = L.enum_value(a["enum"], value)
            ed = lookup_enum(a["enum"])
            case = next((c for c in ed.cases if c.value == v), None) if ed else None
            if case is None:
                raise BytecodeWriteError(
                    f"unsupported attribute type encountered during serialization of attribute "
                    f"'{name}': {value}",
                    op,
                )
            self._check_enum_case(case, f"attribute '{name}'", op)
            if type(value) in _ENUM_VALUE_ATTRS:
                self._enum_ok.add((a["enum"], v))
            w.varint(v)
        elif enc == "string" and isinstance(value, StringAttr):
            w.varint(self.string(value.value))
        elif enc == "symbol" and isinstance(value, (SymbolRefAttr, StringAttr)):
            w.varint(self.string(value.root if isinstance(value, SymbolRefAttr) else value.value))
        elif enc == "uint" and isinstance(value, IntegerAttr):
            w.varint(value.value & ((1 << a["width"]) - 1))
        elif enc == "bool" and isinstance(value, BoolAttr):
            w.u8(1 if value.value else 0)
        elif enc == "i32_array" and isinstance(value, DenseArrayAttr):
            w.le_array("i", value.values)
        elif enc == "bool_array" and isinstance(value, DenseArrayAttr):
            w.varint(len(value.values))
            for b in value.values:
                w.u8(1 if b else 0)
        elif enc == "constant":
            w.varint(self.constant(value, op, name))
        elif enc == "attr_array" and isinstance(value, ArrayAttr):
            w.varint(len(value.values))
            for item in value.values:
                self._sc_attr(w, item, op, name)
        elif enc == "dict_payload" and isinstance(value, (OptimizationHintsAttr, DictAttr)):
            items = value.entries if isinstance(value, OptimizationHintsAttr) else value.items
            self._dict_items(w, items, op, name)
        elif enc == "self_contained":
            self._sc_attr(w, value, op, name)
        else:
            raise BytecodeWriteError(
                f"unsupported attribute type encountered during serialization of attribute "
                f"'{name}': {value}",
                op,
            )

    def _dict_items(self, w: Writer, items, op, name: str) -> None:
        w.varint(len(items))
        for key, v in items:
            w.varint(self.string(key))
            self._sc_attr(w, v, op, name)

    def _sc_attr(self, w: Writer, a, op, name: str) -> None:
        tags = L.ATTR_TAGS
        if isinstance(a, BoolAttr):
            w.varint(tags["BoolAttr"])
            w.u8(1 if a.value else 0)
        elif isinstance(a, IntegerAttr):
            t = a.type or ty.I64
            if not isinstance(t, ty.IntegerType):
                raise BytecodeWriteError(
                    "failed to write type index for self-contained IntegerAttr", op
                )
            w.varint(tags["IntegerAttr"])
            w.varint(self.type(t, op))
            bits = a.value & ((1 << t.width) - 1)
            if t.width == 1:
                w.u8(bits)
            else:
                w.varint(bits)
        elif isinstance(a, FloatAttr):
            t = a.type or ty.F64
            if not isinstance(t, ty.FloatType) or t.name not in SEMANTICS:
                raise BytecodeWriteError(
                    "failed to write type index for self-contained FloatAttr", op
                )
            w.varint(tags["FloatAttr"])
            w.varint(self.type(t, op))
            bits = a.bits if a.bits is not None else SEMANTICS[t.name].from_float(a.value)
            if SEMANTICS[t.name].bits <= 8:
                w.u8(bits)
            else:
                w.svarint(bits)
        elif isinstance(a, TypeAttr):
            w.varint(tags["TypeAttr"])
            w.varint(self.type(a.value, op))
        elif isinstance(a, StringAttr):
            w.varint(tags["StringAttr"])
            w.varint(self.string(a.value))
        elif isinstance(a, ArrayAttr):
            w.varint(tags["ArrayAttr"])
            w.varint(len(a.values))
            for item in a.values:
                self._sc_attr(w, item, op, name)
        elif isinstance(a, DenseElementsAttr):
            w.varint(tags["DenseElementsAttr"])
            w.varint(self.type(a.type, op))
            w.varint(self.constant(a, op, name))
        elif isinstance(a, DivByAttr):
            w.varint(tags["DivByAttr"])
            w.varint(a.divisor)
            w.u8((a.every is not None) | (a.along is not None) << 1)
            if a.every is not None:
                w.svarint(a.every)
            if a.along is not None:
                w.svarint(a.along)
        elif isinstance(a, SameElementsAttr):
            w.varint(tags["SameElementsAttr"])
            w.le_array("q", a.values)
        elif isinstance(a, DictAttr):
            w.varint(tags["DictionaryAttr"])
            self._dict_items(w, a.items, op, name)
        elif isinstance(a, OptimizationHintsAttr):
            w.varint(tags["OptimizationHintsAttr"])
            self._dict_items(w, a.entries, op, name)
        elif isinstance(a, BoundedAttr):
            w.varint(tags["BoundedAttr"])
            w.u8((a.lb is not None) | (a.ub is not None) << 1)
            if a.lb is not None:
                w.svarint(a.lb)
            if a.ub is not None:
                w.svarint(a.ub)
        else:
            raise BytecodeWriteError(
                f"unsupported attribute type encountered during serialization of attribute "
                f"'{name}': {a}",
                op,
            )


#: locations that need no check and no debug record
_PLAIN_LOCS = frozenset((UnknownLoc, FileLineColLoc, DILocAttr))
#: attributes whose ``value`` is the enum's integer value (:func:`layouts.enum_value`)
_ENUM_VALUE_ATTRS = frozenset((EnumAttr, IntegerAttr))


class _OpPlan:
    """What an op's bytecode layout means at the writer's version, worked out once per op name:
    the encoded opcode, the result shape that needs no segment lookup, the flag bits (with
    whether each is newer than the target), and per attribute whether it is newer, what to do
    when it is absent and its spec default."""

    __slots__ = (
        "opcode",
        "simple_results",
        "result_count",
        "flags",
        "write_flags",
        "attrs",
        "operands",
        "operand_names",
        "regions",
    )

    def __init__(self, layout: dict, opdef, vt: tuple):
        buf = bytearray()
        put_varint(buf, layout["opcode"])
        self.opcode = bytes(buf)
        # results: one per definition when every one is single and available at vt
        if all(d.kind == "single" and L.vt(d.since) <= vt for d in opdef.results):
            self.simple_results = len(opdef.results)
        else:
            self.simple_results = -1
        self.result_count = bool(layout["result_count"])
        attr_defs = {a["name"]: a for a in layout["attributes"]}
        flags = []
        for i, name in enumerate(layout["flags"]):
            if name in attr_defs:
                since, is_attr = attr_defs[name]["since"], True
            else:
                since, is_attr = next(d.since for d in opdef.operands if d.name == name), False
            flags.append((i, name, is_attr, L.vt(since) > vt, since))
        self.flags = tuple(flags)
        self.write_flags = bool(layout["flags"]) and vt >= L.vt(layout["flags_since"])
        attrs = []
        for a in layout["attributes"]:
            newer = L.vt(a["since"]) > vt
            skip_absent = a["enc"] == "flag" or bool(a["optional"])
            default = None if newer or skip_absent else L.default_attr(a)
            attrs.append((a, a["name"], newer, skip_absent, a["enc"], default))
        self.attrs = tuple(attrs)
        self.operands = layout["operands"]
        self.operand_names = tuple(d.name for d in opdef.operands)
        self.regions = layout["regions"]


def encode_dense(attr: DenseElementsAttr, op=None) -> bytes:
    """``varint rawSize`` + the raw element buffer (one element for a splat; i1 bit-packed)."""
    t = attr.type
    if not isinstance(t, ty.TileType) or not isinstance(t.element, (ty.IntegerType, ty.FloatType)):
        raise BytecodeWriteError("unsupported attribute type in constant data", op)
    elem = t.element
    if elem.name not in L.T.ELEMENT_TAGS:
        raise BytecodeWriteError(
            "unsupported DenseElementsAttr element type during serialization", op
        )
    if attr.bits is not None:
        bits = list(attr.bits)
    else:
        bits = [element_bits(v, elem) for v in attr.values]
    kind, width = L.element_storage(elem.name)
    n = t.num_elements
    if len(bits) not in (1, n):
        raise BytecodeWriteError(
            f"dense constant has {len(bits)} elements, its type {n}: failed to serialize attribute",
            op,
        )
    if kind == "bitpacked":
        if len(bits) == 1 and n > 8:
            raw = bytes([0xFF if bits[0] & 1 else 0x00])
        else:
            full = bits * n if len(bits) == 1 else bits
            raw = bytearray((n + 7) // 8)
            for i, b in enumerate(full):
                if b & 1:
                    raw[i // 8] |= 1 << (i % 8)
            raw = bytes(raw)
    else:
        raw = b"".join((b & ((1 << (8 * width)) - 1)).to_bytes(width, "little") for b in bits)
    w = Writer()
    w.varint(len(raw))
    w.raw(raw)
    return w.getvalue()
