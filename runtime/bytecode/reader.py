"""Tile IR bytecode reader: bytes -> ``cuda_tile.module`` Operation.

Sections are framed and checked first, then decoded in dependency order (string, producer, type,
constant, global, function, debug) and the module is built. Instructions are decoded generically
from the generated op layouts. Every count read from the file is checked against the bytes left
before anything is allocated, recursion is bounded, and every failure is a :class:`BytecodeError`
carrying NVIDIA's message plus the cascade of context messages.
"""

from __future__ import annotations

import struct
from types import MappingProxyType
from typing import Optional

from tilegen.runtime import types as ty
from tilegen.runtime.asm.dense import dense_from_bits
from tilegen.runtime.asm.float_format import SEMANTICS
from tilegen.runtime.attributes import (
    UNKNOWN_LOC,
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
    FileLineColLoc,
    FloatAttr,
    IntegerAttr,
    OptimizationHintsAttr,
    SameElementsAttr,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
    UnknownLoc,
)
from tilegen.runtime.attributes import EnumAttr
from tilegen.runtime.bytecode import layouts as L
from tilegen.runtime.bytecode.errors import BytecodeError, BytecodeWriteError, context
from tilegen.runtime.bytecode.varint import Cursor, to_signed
from tilegen.runtime.ir import Block, Operation, Region
from tilegen.runtime.limits import MAX_NESTING, deep_stack
from tilegen.runtime.opdef import lookup_enum, lookup_opdef
from tilegen.runtime.asm.type_verify import verify_type

_SCOPES = (DISubprogramAttr, DILexicalBlockAttr)
_LOCATIONS = (UnknownLoc, DILocAttr, CallSiteLoc)
#: attribute classes whose small dicts ops read from bytecode share (Operation copies on write)
_SHAREABLE = frozenset({EnumAttr, UnitAttr})

#: Nesting limit (regions, types, attributes), the text parser's (runtime/limits.py).
MAX_DEPTH = MAX_NESTING
INT32_EXTREMES = (2**31 - 1, -(2**31))
INT64_EXTREMES = (2**63 - 1, -(2**63))


def read_bytecode(
    data: bytes, filename: str = "<bytecode>", entry_invariants: bool = True
) -> Operation:
    """Decode a whole file into a ``cuda_tile.module`` op; raises :class:`BytecodeError`.
    ``entry_invariants``: refuse entries whose arguments are not tiles, as NVIDIA's 13.5 reader
    (tileirdisasm, tileiras) does; the open-source cuda-tile-translate reads them."""
    reader = _Reader(bytes(data), filename)
    reader.entry_invariants = entry_invariants
    try:  # on a deep stack (runtime/limits.py): nesting is bounded by MAX_NESTING, not Python
        return deep_stack(reader.read)
    except RecursionError:  # pragma: no cover - depth limits should make this unreachable
        raise BytecodeError("bytecode nesting exceeds the supported depth") from None


def read_version(data: bytes) -> Optional[str]:
    """The ``M.m`` version in a bytecode header, or None when ``data`` is not Tile IR bytecode."""
    if len(data) < 12 or data[:8] != L.MAGIC:
        return None
    major, minor, tag = struct.unpack_from("<BBH", data, 8)
    return L.vstr(major, minor, tag)


class _Table:
    """An offset-indexed table (strings, types, constants) decoded lazily with memoization."""

    def __init__(self, count: int, offsets: list[int], data: memoryview, what: str, base: int = 0):
        self.count, self.offsets, self.data, self.what = count, offsets, data, what
        self.base = base  # file offset of data[0] (field tracing)
        self.cache: dict[int, object] = {}
        self.busy: set[int] = set()

    def span(self, i: int) -> memoryview:
        start = self.offsets[i]
        end = self.offsets[i + 1] if i + 1 < self.count else len(self.data)
        if not start <= end <= len(self.data):
            if self.what == "strings":  # NVIDIA's StringRef::substr(start, end - start) clamps
                size = len(self.data)
                return self.data[min(start, size) : (min(end, size) if end >= start else size)]
            raise BytecodeError(f"invalid {self.what} offsets for entry {i}", silent=True)
        return self.data[start:end]

    def cursor(self, i: int) -> Cursor:
        return Cursor(self.span(i), base=self.base + self.offsets[i])


class _Reader:
    def __init__(self, data: bytes, filename: str):
        self.data = data
        self.filename = filename
        self.version = "13.1"
        self.vt = (13, 1)
        self.depth = 0
        self._at = ""  # "error at offset N: " for function failures, once sections are read
        self.entry_invariants = True
        self.locs = None
        #: opcode -> _OpPlan: what the op's layout means at the file's version, worked out once
        self._plans: dict[int, _OpPlan] = {}
        #: (enum name, value) -> the attribute (valid cases available at the file's version)
        self._enum_attrs: dict = {}
        #: operand segment sizes -> the operandSegmentSizes attribute
        self._segment_attrs: dict = {}
        #: small attribute dicts of enum / unit values -> one read-only map ops share
        self._attr_maps: dict = {}

    # ------------------------------------------------------------------ framing
    def read(self) -> Operation:
        c = Cursor(self.data)
        with context("failed to parse bytecode header", c):
            self._read_header(c)
        sections: dict[str, Cursor] = {}
        while True:
            with context("failed to parse section header", c):
                if c.at_end():
                    raise c.fail("unexpected end of data while reading section header")
                id_byte = c.u8("failed to read section ID and alignment flag")
                sid, aligned = id_byte & 0x7F, bool(id_byte & 0x80)
                if sid == 0:
                    if aligned:
                        raise c.fail("end section should not have alignment flag set")
                    break
                name = L.SECTION_NAMES.get(sid)
                if name is None:
                    raise c.fail(f"unknown section ID: {sid}")
                length = c.varint("failed to read section length")
                # checked before the alignment is read and the padding skipped (NVIDIA)
                if length > c.remaining:
                    raise c.fail(
                        f"section length {length} exceeds remaining data size {c.remaining}"
                    )
                alignment = 0
                if aligned:
                    alignment = c.varint("failed to read section length")
                    if alignment == 0 or alignment & (alignment - 1) or alignment > 2**16:
                        raise c.fail(f"invalid alignment value: {alignment}")
                    c.skip_to_alignment(alignment, "failed to read section payload")
            required = L.T.SECTIONS[name]["alignment"]
            if required:
                if not aligned:
                    raise c.fail(
                        f"section {sid} must have alignment that is a multiple of {required} "
                        "bytes, but has no alignment flag set"
                    )
                if alignment % required:
                    raise c.fail(
                        f"section {sid} must have alignment that is a multiple of {required} "
                        f"bytes, but has alignment of {alignment}"
                    )
            if length > c.remaining:  # the padding took what the length needed
                raise c.fail(
                    f"section length {length} exceeds remaining bytecode data. {c.remaining}"
                )
            sections[name] = c.sub(length, "failed to read section payload")
        if not c.at_end():
            raise c.fail("end section is not the last section")
        # NVIDIA decodes the sections and builds functions after framing the whole file and
        # reports those failures at the top-level cursor, i.e. at the end of the file
        self.top = c
        self._at = f"error at offset {c.pos}: "
        for name, info in L.T.SECTIONS.items():
            if info["mandatory"] and name not in sections:
                raise BytecodeError(
                    f"{name if name != 'func' else 'function'} section is mandatory"
                )
        return self._decode(sections)

    def _read_header(self, c: Cursor) -> None:
        for i, expected in enumerate(L.MAGIC):
            got = c.u8("invalid magic number: file too short")
            if got != expected:
                raise c.fail(f"invalid magic number at position {i}, got {got} expected {expected}")
        major = c.u8("failed to read bytecode version")
        minor = c.u8("failed to read bytecode version")
        tag = c.fixed("H", "failed to read bytecode version")
        version = L.vstr(major, minor)
        if version not in L.READ_VERSIONS:
            lo, hi = L.PRODUCTION_READ_VERSIONS[0], L.PRODUCTION_READ_VERSIONS[-1]
            raise c.fail(
                f"unsupported Tile version {major}.{minor}.{tag}, "
                f"this reader supports versions [{lo} - {hi}]"
            )
        if tag & ~1:
            raise c.fail(f"header has unrecognized version tag bits (0x{tag & ~1:X});")
        if tag:
            raise c.fail(
                f"public-preview bytecode at version {L.vstr(major, minor, tag)} is not readable; "
                "tilegen does not enable preview features"
            )
        self.version, self.vt = version, L.vt(version)

    def _decode(self, sections: dict[str, Cursor]) -> Operation:
        self.producer: Optional[str] = None
        self.types = self.constants = None
        self.globals: list = []
        self.functions: list = []
        self.debug = None
        empty = Cursor(b"")
        with context("failed to parse string section", self.top):
            self.strings = self._read_offset_table(sections["string"], "strings", 4, 4)
        if "producer" in sections:
            with context("failed to parse producer section", self.top):
                pc = sections["producer"]
                idx = pc.varint("failed to read producer string index")
                try:
                    self.producer = self.string(idx)
                except BytecodeError:
                    raise BytecodeError(f"failed to get producer string at index {idx}") from None
        with context("failed to parse type section", self.top):
            self.types = self._read_offset_table(sections.get("type", empty), "types", 4, 4)
        if "constant" in sections:
            with context("failed to parse constant section", self.top):
                self.constants = self._read_constant_table(sections["constant"])
        if "global" in sections:
            with context("failed to parse global section", self.top):
                self._read_globals(sections["global"])
        with context("failed to parse function section", self.top):
            self._read_functions(sections["func"])
        if "debug" in sections:
            with context("failed to parse debug section", self.top):
                self._read_debug(sections["debug"])
        module = Operation(
            "cuda_tile.module", attributes={"sym_name": StringAttr("kernels")}, regions=1
        )
        if self.producer is not None:
            module.set_attr("producer", StringAttr(self.producer))
        body = module.regions[0].block
        for record in self.globals:
            with context("failed to create global from bytecode"):
                body.append(self._build_global(*record))
        for record in self.functions:
            with context(f"{self._at}failed to create function from bytecode"):
                body.append(self._build_function(*record))
        if self.entry_invariants:
            with context("deserialized module does not conform to bytecode format invariants"):
                _check_invariants(module)
        return module

    # ------------------------------------------------------------------ tables
    def _read_offset_table(self, c: Cursor, what: str, word: int, align: int) -> _Table:
        count = c.varint(f"failed to read number of {what}")
        c.skip_to_alignment(align, f"failed to read number of {what}")
        limit = c.remaining // word
        if count > limit:
            raise c.fail(
                f"number of {what} ({count}) exceeds the maximum of {limit} that can fit in the "
                f"remaining payload of {c.remaining} bytes."
            )
        fmt = "I" if word == 4 else "Q"
        offsets = list(c.words(fmt, count))
        return _Table(count, offsets, c.data[c.pos : c.end], what, c.base + c.pos)

    def string(self, idx: int) -> str:
        t = self.strings
        if idx >= t.count:
            raise BytecodeError(f"string index {idx} out of bounds")
        if idx not in t.cache:
            t.cache[idx] = bytes(t.span(idx)).decode("utf-8", errors="surrogateescape")
        return t.cache[idx]

    def _read_constant_table(self, c: Cursor) -> _Table:
        count = c.varint("failed to read number of constants", maximum=2**32 - 2)
        c.skip_to_alignment(8, "insufficient data for constant indices")
        if count > c.remaining // 8:
            raise c.fail("insufficient data for constant indices")
        offsets = list(c.words("Q", count))
        data = c.data[c.pos : c.end]
        for i, start in enumerate(offsets):
            end = offsets[i + 1] if i + 1 < count else len(data)
            if end < start:
                raise BytecodeError(
                    f"invalid constant start indices: end ({end}) is less than start ({start}) "
                    f"for constant {i}"
                )
            if end > len(data):
                raise BytecodeError(
                    f"constant {i} extends beyond available data: size={end - start}, "
                    f"start={start}, total data size={len(data)}"
                )
        return _Table(count, offsets, data, "constants", c.base + c.pos)

    # ------------------------------------------------------------------ types
    def type(self, idx: int) -> ty.Type:
        t = self.types
        found = t.cache.get(idx)  # only entries in bounds are cached
        if found is not None:
            return found
        if idx >= t.count:  # NVIDIA reports only the caller's message
            raise BytecodeError(f"type index {idx} out of bounds", silent=True)
        found = self._entry(
            t, idx, self._parse_type, f"cyclic or too deeply nested type at index {idx}"
        )
        return found

    def _parse_type(self, c: Cursor) -> ty.Type:
        # NVIDIA reads the tag as a varint but dispatches on (and reports) its low 8 bits only
        tag = c.varint("failed to read type tag") & 0xFF
        # the parameters are read (and failures located) relative to the byte after the tag,
        # and at the position after the last byte read
        c = c.sub(c.remaining)
        name = L.ELEMENT_BY_TAG.get(tag)
        if name is not None:
            since = L.T.ELEMENT_TAGS[name][1]
            if L.vt(since) > self.vt:
                raise BytecodeError(
                    f"type '{L.element_diag_name(name)}' requires bytecode version {since}+, "
                    f"file version is {self.version}"
                )
            return ty.element_type_from_name(name)
        name = L.DIALECT_BY_TAG.get(tag)
        if name is None:
            raise BytecodeError(f"unknown type tag: {tag}")
        info = L.T.DIALECT_TYPES[name]
        if L.vt(info["since"]) > self.vt:
            raise BytecodeError(
                f"type '{info['diag_name']}' requires bytecode version {info['since']}+, "
                f"file version is {self.version}"
            )
        params = info["params"]
        optional = [
            p for p in params if p.get("optional") and L.vt(p.get("since", "13.1")) <= self.vt
        ]
        unified = L.unified_bitfield(self.version)
        flags = 0
        if optional and unified:
            flags = c.varint("failed to read optional parameter flags")
        kwargs = {}
        for p in params:
            present = True
            if p.get("optional"):
                if p not in optional:
                    continue
                if unified:
                    present = bool(flags >> optional.index(p) & 1)
                else:
                    # any non-zero byte means present (NVIDIA's reader; its range check on
                    # this byte is never reached)
                    present = bool(c.u8("failed to read presence byte for optional attribute"))
            if not present:
                continue
            value = self._read_param(c, p, name)
            if "field" not in p:
                raise BytecodeError(f"type parameter '{p['name']}' is not supported by tilegen")
            kwargs[p["field"]] = value
        if flags >> len(optional):  # checked after the parameters (NVIDIA)
            raise c.fail("unused bits set in optional parameter flags")
        t = L.type_class(info["class"])(**kwargs)
        # the text parser's checks (NVIDIA's reader builds types with getChecked): shapes,
        # strides, element counts, partition tiles, dim maps, paddings
        msg = verify_type(t, explicit_dim_map=True)
        if msg:
            raise c.fail(msg)
        return t

    def _read_param(self, c: Cursor, p: dict, type_name: str = ""):
        enc, what = p["enc"], f"failed to read {p['name']}"
        if enc == "type":
            idx = c.varint(f"failed to get {p['name']} type")
            with context(f"failed to get {p['name']} type", c):
                found = self.type(idx)
                expect = p.get("type_class")
                if expect is not None and type(found).__name__ != expect:
                    raise c.fail(
                        f"expected ::mlir::cuda_tile::{expect} but got '{_type_text(found)}'"
                    )
                return found
        if enc == "type_list":
            n = c.varint(f"failed to read number of {p['name']}")
            if n > c.remaining:
                raise c.fail(f"array size in bytecode ({n}) exceeds maximum supported capacity")
            out = []
            for _ in range(n):
                idx = c.varint(what)
                with context("failed to get parameter type", c):
                    out.append(self.type(idx))
            return tuple(out)
        if enc in ("i64_array", "i32_array"):
            fmt = "q" if enc == "i64_array" else "i"
            n = c.varint(what)
            fit = c.remaining // struct.calcsize(fmt)
            if n > fit:  # NVIDIA reads word by word: reported where the missing word starts
                c.pos += fit * struct.calcsize(fmt)
                raise c.fail(_ARRAY_READ_FAILURE.get((type_name, p["name"]), what))
            return tuple(c.words(fmt, n))
        if enc == "u32":
            v = c.varint(what)
            if v > 2**32 - 1:
                raise BytecodeError(f"{p['name']} value {v} exceeds uint32_t range")
            return v
        if enc == "enum":
            v = c.varint("failed to read VarInt for enum attribute.")
            ed = lookup_enum(p["enum"])
            kw = ed.keyword(v) if ed else None
            if kw is None:
                raise c.fail(f"invalid integer value for enum type: {v}")
            case = next(k for k in ed.cases if k.value == v)  # per-case version (PtrAttr 13.5)
            if L.vt(case.since) > self.vt:
                raise c.fail(f"enum value {v} is not available in bytecode version {self.version}")
            return kw
        raise BytecodeError(f"unsupported type parameter encoding {enc}")  # pragma: no cover

    # ------------------------------------------------------------------ constants
    def constant(self, idx: int, type_: ty.Type, at: Optional[Cursor] = None) -> DenseElementsAttr:
        """Constant ``idx`` as a ``type_`` dense attribute; ``at``: the cursor that read ``idx``
        (an out-of-range index is reported at its position)."""
        if self.constants is None or idx >= self.constants.count:
            raise BytecodeError(f"constant index {idx} out of bounds", at.pos if at else None)
        key = (idx, type_)
        cache = self.constants.cache
        if key not in cache:
            cache[key] = self._decode_constant(self.constants.cursor(idx), type_)
        return cache[key]

    def _decode_constant(self, c: Cursor, type_: ty.Type) -> DenseElementsAttr:
        if not isinstance(type_, ty.TileType) or not isinstance(
            type_.element, (ty.IntegerType, ty.FloatType)
        ):
            raise BytecodeError(
                f"expect Cuda Tile integer or float type but got: '{_type_text(type_)}'", c.pos
            )
        size = c.varint("failed to read the size of the data buffer")
        raw = c.bytes(size, "failed to read the raw byte data")
        try:
            return decode_dense(type_, raw)
        except BytecodeError as e:  # reported at the end of the payload, as NVIDIA does
            raise BytecodeError(e.message, c.pos) from None

    # ------------------------------------------------------------------ globals
    def _read_globals(self, c: Cursor) -> None:
        count = c.varint("failed to read number of global.")
        per = 6 if L.unified_bitfield(self.version) else 4
        limit = c.remaining // per
        if count > limit:
            raise c.fail(
                f"number of globals ({count}) exceeds the maximum of {limit} that can fit in the "
                f"remaining payload of {c.remaining} bytes."
            )
        for _ in range(count):
            name_idx = c.varint("failed to read global symbol name string.")
            type_idx = c.varint("failed to read global value type")
            const_idx = c.varint("failed to read global value constant index")
            alignment = c.varint("failed to read global alignment")
            visibility, constant = 0, 0
            if L.unified_bitfield(self.version):
                visibility = c.varint("failed to read global symbol visibility")
                constant = c.varint("failed to read global constant flag")
            self.globals.append((name_idx, type_idx, const_idx, alignment, visibility, constant))

    def _build_global(self, name_idx, type_idx, const_idx, alignment, visibility, constant):
        try:
            name = self.string(name_idx)
        except BytecodeError:
            raise BytecodeError(f"failed to get global symbol name string for index {name_idx}")
        if not name:
            raise BytecodeError(f"global symbol name at index {name_idx} is empty")
        if self.constants is None or const_idx >= self.constants.count:
            raise BytecodeError("global value constant index out of bounds")
        value = self.constant(const_idx, self.type(type_idx))
        ed = lookup_enum("SymbolVisibility")
        if ed is None or ed.keyword(visibility) is None:
            raise BytecodeError(f"invalid symbol visibility value: {visibility}")
        attrs = {
            "sym_name": StringAttr(name),
            "value": value,
            "alignment": IntegerAttr(alignment, ty.I64),
        }
        if constant:
            attrs["constant"] = UnitAttr()
        if visibility:
            attrs["symbol_visibility"] = L.enum_attr("SymbolVisibility", visibility)
        return Operation("cuda_tile.global", attributes=attrs, loc=UNKNOWN_LOC)

    # ------------------------------------------------------------------ functions
    def _read_functions(self, c: Cursor) -> None:
        count = c.varint("failed to read number of functions")
        if count > c.remaining:
            raise c.fail(f"number of functions ({count}) exceeds payload size ({c.remaining})")
        flags_t = L.T.FUNCTION_FLAGS
        v2 = self.vt >= L.vt(L.T.FUNCTION_RECORD_V2_SINCE)
        for _ in range(count):
            name_idx = c.varint("failed to read function name")
            sig_idx = c.varint("failed to read function signature")
            flags = c.u8("failed to read function flags")
            loc_idx = c.varint("failed to read function location")
            unknown = flags & ~sum(flags_t.values())
            if unknown and self.vt >= _FUNCTION_FLAGS_CHECKED_SINCE:  # once the location is read
                raise c.fail(f"function entry has unrecognized flag bits (0x{unknown:X});")
            hints = None
            is_entry = bool(flags & flags_t["entry"])
            if is_entry and (v2 or flags & flags_t["has_hints"]):
                hints = self.sc_attr(c)
                if not isinstance(hints, OptimizationHintsAttr):
                    name = self._function_name(name_idx)
                    raise BytecodeError(
                        f"invalid optimization hints attribute for function '{name}'"
                    )
            if v2:
                self.sc_attr(c)  # argument attribute dictionaries (not modelled)
            length = c.varint("failed to read function body length")
            if length > c.remaining:
                raise c.fail(
                    f"function body length {length} exceeds remaining bytecode data "
                    f"({c.remaining} bytes)"
                )
            body = c.sub(length, f"failed to read {length} bytes for function body")
            self.functions.append((name_idx, sig_idx, is_entry, loc_idx, hints, body))

    def _function_name(self, idx: int) -> str:
        try:
            name = self.string(idx)
        except BytecodeError:
            raise BytecodeError(f"failed to get function name string at index {idx}") from None
        if not name:
            raise BytecodeError(f"function name at index {idx} is empty")
        return name

    def _build_function(self, name_idx, sig_idx, is_entry, loc_idx, hints, body: Cursor):
        name = self._function_name(name_idx)
        if sig_idx >= self.types.count:
            raise BytecodeError(
                f"{self._at}function signature index {sig_idx} out of bounds for function '{name}'"
            )
        # (sic: NVIDIA's message lacks the closing quote)
        with context(f"{self._at}failed to parse type at index {sig_idx} for function '{name}"):
            sig = self.type(sig_idx)
        if not isinstance(sig, ty.FunctionType):
            raise BytecodeError(
                f"{self._at}function signature index {sig_idx} does not refer to a function type for "
                f"function '{name}', got type: {_type_text(sig)}"
            )
        if not is_entry:
            raise BytecodeError(f"un-expected non-entry function '{name}'")
        self.locs = self._function_locs(loc_idx, name)
        attrs = {"sym_name": StringAttr(name), "function_type": TypeAttr(sig)}
        if hints is not None:
            attrs["optimization_hints"] = hints
        loc = self._next_loc(self.top, f"function location for '{name}'")
        func = Operation("cuda_tile.entry", attributes=attrs, regions=1, loc=loc)
        block = func.regions[0].block
        values: list = []
        for t in sig.inputs:
            values.append(block.add_argument(t))
        with context(f"{self._at}failed to parse function body for function '{name}'"):
            while not body.at_end():  # no "failed to parse operation I" note here (tileirdisasm)
                block.append(self._parse_op(body, values))
            self._check_terminator(block)
        return func

    # ------------------------------------------------------------------ debug info
    def _read_debug(self, c: Cursor) -> None:
        nfuncs = c.varint("failed to read total number of operations with debug info")
        c.skip_to_alignment(4, "failed to skip padding for debug info index offset pointer")
        if nfuncs > c.remaining // 4:
            raise c.fail("failed to read debug info index offset pointer.")
        starts = list(c.words("I", nfuncs))
        nidx = c.varint("failed to read total number of debug info indices")
        c.skip_to_alignment(8, "failed to skip padding for debug info indices pointer")
        if nidx > c.remaining // 8:
            raise c.fail("failed to read debug info indices pointer")
        indices = c.words("Q", nidx)
        nattrs = c.varint("failed to read total number of debug info attributes")
        c.skip_to_alignment(4, "failed to skip padding for debug info offset pointer")
        limit = c.remaining // 4
        if nattrs > limit:
            raise c.fail(
                f"number of debug info attributes ({nattrs}) exceeds the maximum of {limit} that "
                f"can fit in the remaining payload of {c.remaining} bytes."
            )
        offsets = list(c.words("I", nattrs))
        self.debug = (
            starts,
            indices,
            _Table(nattrs, offsets, c.data[c.pos : c.end], "debug info", c.base + c.pos),
        )

    def _function_locs(self, op_index: int, name: str):
        """Iterator state over a function's debug indices (None: no locations stored)."""
        if op_index == 0:
            return None
        if self.debug is None or op_index - 1 >= len(self.debug[0]):
            raise BytecodeError(f"{self._at}failed to read function location for '{name}'")
        return [self.debug[0][op_index - 1]]

    def _next_loc(self, c: Optional[Cursor] = None, what: str = "operation location."):
        """The next op location of the current function; failures are reported as NVIDIA
        does, ``failed to read operation location.`` at ``c`` (the op's cursor)."""
        if self.locs is None:
            return UNKNOWN_LOC
        starts, indices, _ = self.debug
        pos = self.locs[0]
        self.locs[0] += 1
        try:
            if pos >= len(indices):
                raise BytecodeError(f"debug info index entry {pos} out of bounds", silent=True)
            loc = self.di(indices[pos])
            if not isinstance(loc, (UnknownLoc, DILocAttr, CallSiteLoc)):
                raise BytecodeError(
                    f"debug info attribute {indices[pos]} is not a location", silent=True
                )
        except BytecodeError as e:
            _note(e, f"failed to read {what}", c)
            raise
        return loc

    def di(self, idx: int):
        if idx == 0:
            return UNKNOWN_LOC
        table = self.debug[2]
        k = idx - 1
        found = table.cache.get(k)  # only entries in bounds are cached
        if found is not None:
            return found
        if k >= table.count:  # NVIDIA reports only the caller's message
            raise BytecodeError(f"debug info index {idx} out of bounds", silent=True)
        return self._entry(
            table, k, self._parse_di, f"cyclic or too deeply nested debug info attribute {idx}"
        )

    def _entry(self, table: _Table, k: int, parse, cyclic: str):
        """Entry ``k`` of a lazily decoded table, parsed once; ``cyclic`` on reference loops."""
        if k in table.cache:
            return table.cache[k]
        if k in table.busy or self.depth > MAX_DEPTH:
            raise BytecodeError(cyclic)
        table.busy.add(k)
        self.depth += 1
        try:
            found = parse(table.cursor(k))
        finally:
            self.depth -= 1
            table.busy.discard(k)
        table.cache[k] = found
        return found

    def _parse_di(self, c: Cursor):
        tag = c.varint("failed to read debug info tag")
        kind = L.DEBUG_BY_TAG.get(tag, "UnknownLoc")

        def rd(field: str, cls: str):
            return c.varint(f"failed to read {field} when parsing {cls}")

        def ref(field: str, cls):
            """A debug-info reference of class ``cls``; anything else fails as NVIDIA's
            reader does, with the message of the field that holds it."""
            what = f"failed to read {field} when parsing {kind}"
            idx = c.varint(what)
            with context(what, c):
                attr = self.di(idx)
                if not isinstance(attr, cls):
                    raise BytecodeError(
                        f"debug info attribute {idx} has the wrong kind", silent=True
                    )
            return attr

        if kind == "DICompileUnitAttr":
            return DICompileUnitAttr(ref("file attribute", DIFileAttr))
        if kind == "DIFileAttr":
            name = self.string(rd("file name attribute", kind))
            return DIFileAttr(name, self.string(rd("directory attribute", kind)))
        if kind == "DILexicalBlockAttr":
            scope = ref("scope attribute", _SCOPES)
            file = ref("file attribute", DIFileAttr)
            line = rd("line number", kind)
            col = rd("column number", kind)
            return DILexicalBlockAttr(scope, file, line, col or None)
        if kind == "DILocAttr":
            scope = ref("scope attribute", _SCOPES)
            fname = self.string(rd("file name attribute", "FileLineColLoc"))
            line = rd("line number", "FileLineColLoc")
            col = rd("column number", "FileLineColLoc")
            return DILocAttr(FileLineColLoc(fname, line, col), scope)
        if kind == "DISubprogramAttr":
            file = ref("file attribute", DIFileAttr)
            line = rd("line number", kind)
            name = self.string(rd("name attribute", kind))
            linkage = self.string(rd("linkage name attribute", kind))
            cu = ref("compile unit attribute", DICompileUnitAttr)
            scope_line = rd("scope line number", kind)
            flags = 0
            if self.vt >= L.vt(L.T.SUBPROGRAM_FLAGS_SINCE):
                flags = rd("flags", kind)
                if flags & ~1:
                    raise BytecodeError(
                        f"unrecognized flag bits (0x{flags & ~1:X}) when parsing DISubprogramAttr"
                    )
            return DISubprogramAttr(file, line, name, linkage, cu, scope_line or None, flags)
        if kind == "CallSiteLoc":
            callee = ref("callee attribute", _LOCATIONS)
            return CallSiteLoc(callee, ref("caller attribute", _LOCATIONS))
        return UNKNOWN_LOC

    # ------------------------------------------------------------------ instructions
    def _plan(self, opcode: int, c: Cursor) -> "_OpPlan":
        """The :class:`_OpPlan` of ``opcode``; refuses opcodes the file's version lacks."""
        if opcode > L.ceiling(self.version):
            raise c.fail(f"unsupported opcode {opcode} for bytecode version {self.version}")
        name = L.OPCODES.get(opcode)
        if name is None:
            raise c.fail(f"unknown or unimplemented opcode: {opcode}")
        plan = self._plans[opcode] = _OpPlan(name, self.vt)
        return plan

    def _parse_op(self, c: Cursor, values: list) -> Operation:
        opcode = c.varint("failed to read operation opcode.")
        p = self._plans.get(opcode)
        if p is None:
            p = self._plan(opcode, c)
        opdef = p.opdef
        loc = UNKNOWN_LOC if self.locs is None else self._next_loc(c)
        # results: counted or one per result available in the file's version
        # (a count is not checked against the bytes left: each type index takes one or more)
        n = c.varint(p.count_what) if p.result_count else p.n_present
        result_types = []
        if n:
            tcache = self.types.cache  # only entries in bounds are cached
            whats = p.result_whats
            for i in range(n):
                what = whats[i] if i < len(whats) else f"failed to get result type {i} for {p.cls}"
                idx = c.varint(what)
                t = tcache.get(idx)
                if t is None:
                    try:
                        t = self.type(idx)
                    except BytecodeError as e:
                        _note(e, what, c)
                        raise
                result_types.append(t)
        if p.synthesized:
            if p.synth_error is not None:
                raise c.fail(p.synth_error)
            result_types.extend(p.synthesized)
        # flags
        bit = _NO_BITS
        if p.flag_names:
            flags = 0
            if p.read_flags:
                # bits beyond the layout's are ignored, as NVIDIA's reader ignores them
                flags = c.varint("failed to read flags field")
            bit = {f: bool(flags >> i & 1) for i, f in enumerate(p.flag_names)}
        # attributes
        attrs: dict = {}
        for kind, name, a, extra, enum in p.attrs:
            if kind is _NEWER:
                if bit.get(name):
                    raise c.fail(
                        f"malformed bytecode: flag set for attribute '{name}' which requires "
                        f"{a['since']} but reading {self.version} bytecode"
                    )
                if extra is not None:
                    attrs[name] = extra
                continue
            if kind is _FLAG:
                if bit.get(name):
                    attrs[name] = _UNIT
                continue
            if kind is _OPTIONAL and not bit.get(name):
                continue
            try:
                if enum is not None:  # an inline enum (the common attribute): _enum's cache
                    v = c.varint("failed to read VarInt for enum attribute.")
                    found = self._enum_attrs.get((enum, v))
                    attrs[name] = found if found is not None else self._enum_case(c, enum, v)
                else:
                    attrs[name] = self._inline_attr(c, a, result_types)
            except BytecodeError as e:
                _note(e, extra, c)
                raise
        # operands
        if p.operands == "fixed":
            operands = []
            nvalues = len(values)
            for j, what in enumerate(p.operand_whats):
                idx = c.varint(what)
                if idx >= nvalues:
                    raise c.fail(
                        f"operand index {idx} out of bounds (size={nvalues}) for operand {j}"
                    )
                operands.append(values[idx])
        else:
            operands = self._read_operands(c, opdef, p.layout, bit, values, attrs)
        # regions
        regions = []
        if p.regions:
            nreg = c.varint("failed to read number of regions to parse.")
            if nreg != p.regions:
                raise c.fail(f"{p.name} op expected {p.regions} regions, got {nreg}")
            if self.depth > MAX_DEPTH:
                raise c.fail("regions nested too deeply")
            self.depth += 1
            try:
                for i in range(nreg):
                    try:
                        regions.append(self._parse_region(c, values))
                    except BytecodeError as e:
                        _note(e, f"failed to parse region {i}")
                        raise
            finally:
                self.depth -= 1
        if p.result_count:  # checked once the whole op is read (NVIDIA)
            fixed = p.fixed_results
            if n < fixed or (n != fixed and not p.variadic_results):
                raise c.fail(
                    f"result count mismatch for {p.cls}: expected {fixed} compatible results but "
                    f"got {n}"
                )
        if attrs and len(attrs) <= 2 and all(type(v) in _SHAREABLE for v in attrs.values()):
            key = tuple(attrs.items())  # (the `overflow` every addi carries): one shared map
            shared = self._attr_maps.get(key)
            if shared is None:
                shared = self._attr_maps[key] = MappingProxyType(attrs)
            attrs = shared
        op = Operation(p.name, operands, result_types, attrs, regions=regions, loc=loc, opdef=opdef)
        if p.synthesized:
            values.extend(op.results[: len(op.results) - len(p.synthesized)])
        else:
            r = op._results  # the one result, or a tuple (ir.Operation.results)
            if r.__class__ is tuple:
                values.extend(r)
            else:
                values.append(r)
        return op

    def _read_operands(self, c, opdef, layout, bit, values, attrs) -> list:
        def val(i: int, j: int, group: Optional[str] = None):
            idx = c.varint(
                f"failed to read operand index for {group} segment, element {j}"
                if group
                else f"failed to read operand index {j}"
            )
            if idx >= len(values):
                where = f"for {group} segment, element {j}" if group else f"for operand {j}"
                raise c.fail(f"operand index {idx} out of bounds (size={len(values)}) {where}")
            return values[idx]

        enc = layout["operands"]
        if enc == "fixed":
            return [val(j, j) for j in range(len(opdef.operands))]
        if enc == "counted":
            n = c.varint("failed to read operand count")
            if n > c.remaining:
                raise c.fail(f"array size in bytecode ({n}) exceeds maximum supported capacity")
            return [val(j, j) for j in range(n)]
        out, sizes = [], []
        for d in opdef.operands:
            if d.kind == "single":
                n = 1
            elif d.kind == "optional":
                n = 1 if bit.get(d.name) and L.vt(d.since) <= self.vt else 0
                if bit.get(d.name) and L.vt(d.since) > self.vt:
                    raise c.fail(
                        f"malformed bytecode: flag set for operand '{d.name}' which requires "
                        f"{d.since} but reading {self.version} bytecode"
                    )
            else:
                n = c.varint(
                    f"failed to read actual size for variadic ODS segment '{d.name}' of op "
                    f"'{opdef.name}'"
                )
                if n > c.remaining:
                    raise c.fail(
                        f"failed to read operands for {d.name} segment, exceeds maximum "
                        "supported capacity"
                    )
            out.extend(val(len(out), j, d.name) for j in range(n))
            sizes.append(n)
        key = tuple(sizes)
        seg = self._segment_attrs.get(key)
        if seg is None:
            seg = self._segment_attrs[key] = DenseArrayAttr(ty.I32, key)
        attrs["operandSegmentSizes"] = seg
        return out

    def _parse_region(self, c: Cursor, values: list) -> Region:
        region = Region()
        nblocks = c.varint("failed to read region block count")
        if nblocks > c.remaining:
            raise c.fail("failed to read region block count")
        for b in range(nblocks):
            with context(f"failed to parse block {b} in region."):
                block = region.append(Block())
                mark = len(values)
                nargs = c.varint("failed to read block argument count.")
                if nargs > c.remaining:
                    raise c.fail("failed to read block argument count.")
                for i in range(nargs):
                    what = f"failed to read block argument type: {i}"
                    idx = c.varint(what)
                    with context(what, c):
                        values.append(block.add_argument(self.type(idx)))
                nops = c.varint("failed to read block operation count.")
                if nops > c.remaining:
                    raise c.fail("failed to read block operation count.")
                for i in range(nops):
                    try:
                        block.append(self._parse_op(c, values))
                    except BytecodeError as e:
                        _note(e, f"failed to parse operation {i} in block.")
                        raise
                self._check_terminator(block)
                del values[mark:]
        return region

    @staticmethod
    def _check_terminator(block: Block) -> None:
        if not block.ops:
            raise BytecodeError(
                "invalid block structure: block is expected to have a terminator operation, "
                "but it is empty"
            )
        last = block.ops[-1]
        if last.opdef is None or not last.opdef.has_trait("Terminator"):
            raise BytecodeError(
                "invalid block structure: block is expected to have a terminator operation, but "
                f"the last operation '{last.name}' is not a terminator."
            )

    # ------------------------------------------------------------------ attributes
    def _inline_attr(self, c: Cursor, a: dict, result_types: list):
        enc = a["enc"]
        if enc == "enum":
            return self._enum(c, a["enum"])
        if enc == "string":
            return StringAttr(self.string(c.varint("failed to read StringAttr.")))
        if enc == "symbol":
            s = self.string(c.varint("failed to read string for FlatSymbolRefAttr."))
            if not s:
                raise c.fail("empty symbol reference is invalid")
            return SymbolRefAttr(s)
        if enc == "uint":
            v = c.varint(f"failed to read VarInt for inline integer (width={a['width']})")
            if v >> a["width"]:
                raise c.fail(f"value {v} does not fit in {a['width']} bits")
            return IntegerAttr(to_signed(v, a["width"]), ty.IntegerType(a["width"]))
        if enc == "bool":
            return BoolAttr(bool(c.u8("failed to read byte for inline bool (i1)")))
        if enc == "i32_array":
            vals = c.le_array("i", "failed to read DenseI32ArrayAttr values.")
            for v in vals:
                if v in INT32_EXTREMES:
                    raise c.fail(f"array contains unsupported value {v}")
            return DenseArrayAttr(ty.I32, tuple(vals))
        if enc == "bool_array":
            n = c.varint("failed to read DenseBoolArrayAttr values.")
            raw = c.bytes(n, "failed to read DenseBoolArrayAttr values.")
            return DenseArrayAttr(ty.I1, tuple(bool(b) for b in raw))
        if enc == "constant":
            if not result_types:
                raise c.fail(
                    "parsed constant attribute is not the expected type derived from DenseElementsAttr"
                )
            return self.constant(c.varint("failed to read constant index"), result_types[0], c)
        if enc == "attr_array":
            return self._sc_array(c)
        if enc == "dict_payload":
            return OptimizationHintsAttr(self._sc_dict_items(c, hints=True))
        if enc == "self_contained":
            value = self.sc_attr(c)
            iface = a.get("interface")
            if iface is not None and not isinstance(value, _INTERFACES[iface]):
                raise c.fail(f"failed to cast parsed attribute to {iface}AttrInterface")
            return value
        raise c.fail("attribute deserialization not implemented for the requested C++ type")

    def _enum(self, c: Cursor, enum_name: str):
        v = c.varint("failed to read VarInt for enum attribute.")
        found = self._enum_attrs.get((enum_name, v))
        if found is not None:  # a valid case, available at this version (attributes are immutable)
            return found
        return self._enum_case(c, enum_name, v)

    def _enum_case(self, c: Cursor, enum_name: str, v: int):
        """The attribute for case ``v`` of ``enum_name`` (just read from ``c``), checked."""
        ed = lookup_enum(enum_name)
        case = next((k for k in ed.cases if k.value == v), None) if ed else None
        if case is None:
            raise c.fail(f"invalid integer value for enum type: {v}")
        if L.vt(case.since) > self.vt:
            raise c.fail(f"enum value {v} is not available in bytecode version {self.version}")
        found = self._enum_attrs[(enum_name, v)] = L.enum_attr(enum_name, v)
        return found

    def sc_attr(self, c: Cursor):
        """A self-contained attribute: tag varint + payload."""
        if self.depth > MAX_DEPTH:
            raise c.fail("attribute nesting too deep")
        self.depth += 1
        try:
            return self._sc_attr(c)
        finally:
            self.depth -= 1

    def _sc_attr(self, c: Cursor):
        tag = c.varint("failed to read AttributeTag for self-contained attribute.")
        kind = L.ATTR_BY_TAG.get(tag)
        if kind is None or L.vt(L.ATTR_TAG_SINCE[kind]) > self.vt:
            raise c.fail(f"unsupported AttributeTag {tag} for self-contained attribute")
        if kind == "IntegerAttr":
            t = self.type(c.varint("failed to read valid IntegerType for IntegerAttr"))
            if not isinstance(t, ty.IntegerType):
                raise c.fail("failed to read valid IntegerType for IntegerAttr")
            if t.width == 1:
                v = c.u8("failed to read byte for inline bool (i1)")
                if v > 1:
                    raise c.fail(f"value {v} does not fit in 1 bits")
                return IntegerAttr(v, t)
            v = c.varint(f"failed to read VarInt for inline integer (width={t.width})")
            if v >> t.width:
                raise c.fail(f"value {v} does not fit in {t.width} bits")
            return IntegerAttr(to_signed(v, t.width), t)
        if kind == "FloatAttr":
            t = self.type(c.varint("failed to read valid FloatType for FloatAttr"))
            if not isinstance(t, ty.FloatType) or t.name not in SEMANTICS:
                raise c.fail("failed to read valid FloatType for FloatAttr")
            sem = SEMANTICS[t.name]
            bits = self._apint(c, sem.bits) & ((1 << sem.bits) - 1)
            return FloatAttr(sem.to_float(bits), t, bits)
        if kind == "BoolAttr":
            return BoolAttr(bool(c.u8("failed to read byte for inline bool (i1)")))
        if kind == "TypeAttr":
            return TypeAttr(self.type(c.varint("failed to get referenced type for TypeAttr")))
        if kind == "StringAttr":
            return StringAttr(self.string(c.varint("failed to read StringAttr.")))
        if kind == "ArrayAttr":
            return self._sc_array(c)
        if kind == "DenseElementsAttr":
            t = self.type(
                c.varint("failed to read valid MLIR Type for self-contained DenseElementsAttr")
            )
            return self.constant(c.varint("failed to read constant index"), t, c)
        if kind == "DivByAttr":
            divisor = c.varint("failed to read divisor for DivByAttr")
            # a varint (NVIDIA), its unknown bits checked after the fields it announces
            fl = c.varint("failed to read flags byte for DivByAttr")
            every = c.svarint("failed to read value for 'every' in DivByAttr") if fl & 1 else None
            along = c.svarint("failed to read value for 'along' in DivByAttr") if fl & 2 else None
            if fl & ~3:
                raise c.fail("unused bits set in optional parameter flags")
            return DivByAttr(divisor, every, along)
        if kind == "SameElementsAttr":
            vals = c.le_array("q", "failed to read DenseI64ArrayAttr for SameElementsAttr")
            for v in vals:
                if v in INT64_EXTREMES:
                    raise c.fail(f"array contains unsupported value {v}")
            return SameElementsAttr(tuple(vals))
        if kind == "DictionaryAttr":
            return DictAttr(self._sc_dict_items(c))
        if kind == "OptimizationHintsAttr":
            return OptimizationHintsAttr(self._sc_dict_items(c, hints=True))
        if kind == "BoundedAttr":
            fl = c.varint("failed to read flags byte for BoundedAttr")  # as DivByAttr's
            lb = c.svarint("failed to read lower bound for BoundedAttr") if fl & 1 else None
            ub = c.svarint("failed to read upper bound for BoundedAttr") if fl & 2 else None
            if fl & ~3:
                raise c.fail("unused bits set in optional parameter flags")
            return BoundedAttr(lb, ub)
        if kind == "MultimemReductionKindAttr":
            return self._enum(c, "MultimemReductionKind")
        raise c.fail(f"unsupported AttributeTag {tag} for self-contained attribute")

    def _apint(self, c: Cursor, width: int) -> int:
        """A FloatAttr bit pattern as an APInt: one byte (<= 8 bits), an svarint (<= 64 bits), or
        counted svarint words."""
        if width <= 8:
            v = c.u8("failed to read byte for APInt (<= 8 bits).")
            if v >> width:
                raise c.fail(f"value {v} does not fit in {width} bits.")
            return v
        if width <= 64:  # the zig-zag of the zero-extended bits: a negative value never fits
            v = c.svarint("failed to read signed varint for APInt (<= 64 bits).") & (2**64 - 1)
            if v >> width:
                raise c.fail(f"value {v} does not fit in {width} bits")
            return v
        nwords = c.varint("failed to read numActiveWords for APInt (> 64 bits).")
        limit = (width + 63) // 64
        if nwords > limit:
            raise c.fail(f"numActiveWords {nwords} exceeds maximum of {limit} for {width} bit")
        if nwords == 0:
            raise c.fail("numActiveWords cannot be zero for multi-word APInt")
        v = 0
        for i in range(nwords):
            v |= (c.svarint(f"failed to read word {i} for multi-word APInt.") & (2**64 - 1)) << (
                64 * i
            )
        return v

    def _sc_array(self, c: Cursor) -> ArrayAttr:
        n = c.varint("failed to read size for ArrayAttr.")
        if n > c.remaining:
            raise c.fail(f"array size in bytecode ({n}) exceeds maximum supported capacity")
        items = []
        for i in range(n):
            with context(f"failed to parse ArrayAttr element {i}", c):
                items.append(self.sc_attr(c))
        return ArrayAttr(tuple(items))

    def _sc_dict_items(self, c: Cursor, hints: bool = False) -> tuple:
        n = c.varint("failed to read size for DictionaryAttr")
        if n > c.remaining:
            raise c.fail(f"array size in bytecode ({n}) exceeds maximum supported capacity")
        items, seen = [], set()
        for i in range(n):
            key = self.string(c.varint(f"failed to read key for DictionaryAttr element {i}"))
            if not key:
                raise c.fail(f"invalid empty attribute name for DictionaryAttr element {i}")
            if key in seen:
                raise c.fail(f"failed to parse DictionaryAttr, duplicate key found: {key}")
            seen.add(key)
            with context(f"failed to parse DictionaryAttr value for key {key}", c):
                value = self.sc_attr(c)
            if hints and not isinstance(value, DictAttr):
                raise c.fail("failed to parse OptimizationHintsAttr")
            items.append((key, value))
        return tuple(items)


def _note(e: BytecodeError, message: str, cursor: Optional[Cursor] = None) -> None:
    """What ``with context(message, cursor)`` adds to ``e`` as it passes (the hot paths use
    ``try``/``except`` and build the message only on failure)."""
    if not isinstance(e, BytecodeWriteError):
        e.add_context(message if cursor is None else f"error at offset {cursor.pos}: {message}")


_NO_BITS: dict = {}
_UNIT = UnitAttr()
#: kinds of layout attributes in an :class:`_OpPlan`
_NEWER, _FLAG, _OPTIONAL, _REQUIRED = "newer", "flag", "optional", "required"


class _OpPlan:
    """What an opcode's layout means at the file's version, worked out once per opcode: the
    results present and synthesized, the flag bits, each attribute's kind (newer than the file,
    a flag, optional, required) with its spec default or its failure context, the operand
    encoding and the failure messages of the fixed reads."""

    __slots__ = (
        "name",
        "layout",
        "opdef",
        "cls",
        "n_present",
        "result_count",
        "count_what",
        "result_whats",
        "synthesized",
        "synth_error",
        "fixed_results",
        "variadic_results",
        "flag_names",
        "read_flags",
        "attrs",
        "operands",
        "operand_whats",
        "regions",
    )

    def __init__(self, name: str, vt: tuple):
        layout = L.OP_LAYOUTS[name]
        opdef = lookup_opdef(name)
        cls = _cpp_class(opdef)
        self.name, self.layout, self.opdef, self.cls = name, layout, opdef, cls
        present = [r for r in opdef.results if L.vt(r.since) <= vt]
        self.n_present = len(present)
        self.result_count = bool(layout["result_count"])
        self.count_what = f"failed to read number of result types for {cls}"
        self.result_whats = tuple(
            f"failed to get result type {i} for {cls}" for i in range(max(len(present), 4))
        )
        synthesized = [r for r in opdef.results if L.vt(r.since) > vt]
        self.synth_error = next(
            (
                f"cannot synthesize result '{r.name}' for {cls}"
                for r in synthesized
                if "Token" not in r.type
            ),
            None,
        )
        self.synthesized = tuple(ty.TOKEN for _ in synthesized)
        self.fixed_results = sum(1 for r in present if r.kind == "single")
        self.variadic_results = any(r.kind != "single" for r in present)
        self.flag_names = tuple(layout["flags"])
        self.read_flags = bool(layout["flags"]) and vt >= L.vt(layout["flags_since"])
        attrs = []
        for a in layout["attributes"]:
            if L.vt(a["since"]) > vt:
                attrs.append((_NEWER, a["name"], a, L.default_attr(a), None))
            elif a["enc"] == "flag":
                attrs.append((_FLAG, a["name"], a, None, None))
            else:
                what = "optional attribute" if a["optional"] else "attribute"
                kind = _OPTIONAL if a["optional"] else _REQUIRED
                message = f"failed to parse {what} '{a['name']}'"
                a = _with_interface(a, opdef)
                enum = a["enum"] if a["enc"] == "enum" else None
                attrs.append((kind, a["name"], a, message, enum))
        self.attrs = tuple(attrs)
        self.operands = layout["operands"]
        self.operand_whats = tuple(
            f"failed to read operand index {j}" for j in range(len(opdef.operands))
        )
        self.regions = layout["regions"]


#: NVIDIA's reader refuses unknown function flag bits in files of this version and newer only
_FUNCTION_FLAGS_CHECKED_SINCE = (13, 4)

#: NVIDIA's messages for a type's array parameter that runs past its entry (default:
#: ``failed to read NAME``)
_ARRAY_READ_FAILURE = {
    ("tile", "shape"): "failed to read concreteShapeCache",
    ("partition_view", "tile_shape"): "failed to read tile_shape data",
    ("strided_view", "tile_shape"): "failed to read tile_shape data",
    ("strided_view", "traversal_strides"): "failed to read traversal_strides data",
    ("gather_scatter_view", "tile_shape"): "failed to read tile_shape data",
}

#: attribute interfaces (``kind: attr-interface``, ``class: X``) -> the attributes implementing them
_INTERFACES = {"AssumePredicate": (DivByAttr, SameElementsAttr, BoundedAttr)}
_LAYOUTS_WITH_INTERFACE: dict = {}


def _with_interface(a: dict, opdef) -> dict:
    """The layout entry ``a`` plus ``interface`` when the op declares the attribute as an
    attribute interface (NVIDIA's reader casts the self-contained attribute to it)."""
    key = (opdef.name, a["name"])
    found = _LAYOUTS_WITH_INTERFACE.get(key)
    if found is None:
        found = a
        for d in opdef.attributes:
            if d.name == a["name"] and d.kind == "attr-interface" and d.attr_class in _INTERFACES:
                found = dict(a, interface=d.attr_class)
        _LAYOUTS_WITH_INTERFACE[key] = found
    return found


def _check_invariants(module: Operation) -> None:
    """What NVIDIA's reader checks on the built module before verification: every entry
    argument is a tile (its rank is the verifier's business)."""
    for op in module.regions[0].block.ops:
        if op.name != "cuda_tile.entry":
            continue
        for i, t in enumerate(op.attributes["function_type"].value.inputs):
            if not isinstance(t, ty.TileType):
                raise BytecodeError(
                    f"unsupported type in bytecode for entry argument #{i}: '{_type_text(t)}'; "
                    "expected a rank-0 !cuda_tile.tile type"
                )


# --------------------------------------------------------------------------- dense payloads


def decode_dense(type_: ty.TileType, raw: bytes) -> DenseElementsAttr:
    """A constant-pool payload (splat or full, row-major, little-endian) as a DenseElementsAttr."""
    elem = type_.element
    n = type_.num_elements
    kind, width = L.element_storage(elem.name)
    if kind == "bitpacked":
        if len(raw) == 1 and (n == 1 or n > 8):
            bits = [raw[0] & 1]
        elif len(raw) == (n + 7) // 8:
            bits = [raw[i // 8] >> (i % 8) & 1 for i in range(n)]
        else:
            raise BytecodeError(
                f"i1 dense attribute payload size {len(raw)} is not a recognized encoding for "
                f"{n} elements"
            )
        return dense_from_bits(type_, bits)
    if len(raw) == width:
        count = 1
    elif n > 0 and len(raw) == width * n:
        count = n
    else:
        raise BytecodeError("failed to validate buffer size and format")
    if isinstance(elem, ty.FloatType) and elem.name not in SEMANTICS:
        raise BytecodeError(f"unsupported float type: {elem.name}")
    mask = (
        1 << (elem.width if isinstance(elem, ty.IntegerType) else SEMANTICS[elem.name].bits)
    ) - 1
    return dense_from_bits(
        type_,
        [int.from_bytes(raw[i * width : (i + 1) * width], "little") & mask for i in range(count)],
    )


# --------------------------------------------------------------------------- helpers


_CPP_CLASSES: dict = {}


def _cpp_class(opdef) -> str:
    """The C++ class name NVIDIA's messages use (``PrintTkoOp``): the generated OpView's name."""
    if not _CPP_CLASSES:
        from tilegen.generated.cuda_tile import ops as gen

        _CPP_CLASSES.update(gen.OP_CLASS_NAMES)
    return _CPP_CLASSES.get(opdef.name, opdef.mnemonic)


def _type_text(t: ty.Type) -> str:
    """A type as MLIR prints it in diagnostics (``!cuda_tile.tile<2xi32>``)."""
    from tilegen.runtime.asm.type_syntax import format_type

    return format_type(t)
