"""Primitive encodings: LEB128 varints, zig-zag svarints, little-endian words, and a bounded cursor.

Every read is bounds-checked against the buffer; nothing here allocates more than the bytes it
was given could describe.
"""

from __future__ import annotations

import struct
from typing import Optional

from tilegen.runtime.bytecode.errors import BytecodeError

U64_MASK = (1 << 64) - 1


# --------------------------------------------------------------------------- encoding


#: the one-byte encodings, shared
_SMALL = [bytes((i,)) for i in range(0x80)]


def encode_varint(value: int) -> bytes:
    """Canonical (shortest) unsigned LEB128 of a value in [0, 2^64)."""
    if 0 <= value < 0x80:
        return _SMALL[value]
    if value < 0 or value > U64_MASK:
        raise ValueError(f"varint out of range: {value}")
    out = bytearray()
    _put_long(out, value)
    return bytes(out)


def _put_long(buf: bytearray, value: int) -> None:
    while value > 0x7F:
        buf.append((value & 0x7F) | 0x80)
        value >>= 7
    buf.append(value)


def put_varint(buf: bytearray, v: int) -> None:
    """Append the canonical LEB128 of ``v`` to ``buf``; a value outside [0, 2^64) is a
    :class:`BytecodeWriteError` (a value the IR allows but the format cannot hold)."""
    if 0 <= v < 0x80:
        buf.append(v)
    elif 0 <= v <= U64_MASK:
        _put_long(buf, v)
    else:
        from tilegen.runtime.bytecode.errors import BytecodeWriteError

        raise BytecodeWriteError(f"value {v} does not fit in a 64-bit bytecode varint")


def zigzag(value: int) -> int:
    """Signed 64-bit -> zig-zag unsigned."""
    return ((value << 1) ^ (value >> 63)) & U64_MASK


def unzigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def encode_svarint(value: int) -> bytes:
    return encode_varint(zigzag(value))


def to_signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if bits and value >> (bits - 1) else value


class _Structs(dict):
    """``fmt`` -> the compiled little-endian :class:`struct.Struct`, made on first use."""

    def __missing__(self, fmt: str) -> struct.Struct:
        s = self[fmt] = struct.Struct("<" + fmt)
        return s


_STRUCTS = _Structs()


class Writer:
    """An append-only byte buffer with the primitive encoders."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def __len__(self) -> int:
        return len(self.buf)

    def u8(self, v: int) -> None:
        self.buf.append(v & 0xFF)

    def varint(self, v: int) -> None:
        put_varint(self.buf, v)

    def svarint(self, v: int) -> None:
        if not -(2**63) <= v < 2**63:
            from tilegen.runtime.bytecode.errors import BytecodeWriteError

            raise BytecodeWriteError(f"value {v} does not fit in a signed 64-bit bytecode varint")
        put_varint(self.buf, zigzag(v))

    def fixed(self, fmt: str, v: int) -> None:
        self.buf += _STRUCTS[fmt].pack(v)

    def le_array(self, fmt: str, values) -> None:
        self.varint(len(values))
        pack = _STRUCTS[fmt].pack
        for v in values:
            self.buf += pack(v)

    def raw(self, data: bytes) -> None:
        self.buf += data

    def align(self, alignment: int, pad: int) -> None:
        n = -len(self.buf) % alignment
        if n:
            self.buf += bytes((pad,)) * n

    def getvalue(self) -> bytes:
        return bytes(self.buf)


# --------------------------------------------------------------------------- decoding


#: When a list, every field read appends ``(file offset, byte length, kind, what)`` (kind:
#: ``varint``, ``u8`` or a struct format; what: the read's failure message, naming the field):
#: the map of a file's fields that ``bench/fuzz_bytecode.py`` sweeps. None: no tracing.
TRACE: Optional[list] = None


class Cursor:
    """A bounded read position over ``data``; errors carry the offset within this buffer.
    ``base`` is the file offset of ``data[0]`` (for :data:`TRACE` only; messages stay relative,
    as NVIDIA's are)."""

    __slots__ = ("data", "pos", "end", "base")

    def __init__(self, data, pos: int = 0, end: Optional[int] = None, base: int = 0):
        self.data = memoryview(data) if not isinstance(data, memoryview) else data
        self.pos = pos
        self.end = len(self.data) if end is None else end
        self.base = base

    def _trace(self, start: int, kind: str, what: str) -> None:
        TRACE.append((self.base + start, self.pos - start, kind, what))

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def at_end(self) -> bool:
        return self.pos >= self.end

    def fail(self, message: str) -> BytecodeError:
        return BytecodeError(message, self.pos)

    def u8(self, what: str = "unexpected end of data") -> int:
        if self.pos >= self.end:
            raise self.fail(what)
        v = self.data[self.pos]
        self.pos += 1
        if TRACE is not None:
            self._trace(self.pos - 1, "u8", what)
        return v

    def varint(self, what: str = "unexpected end of data", maximum: Optional[int] = None) -> int:
        start = self.pos
        if start < self.end and TRACE is None:  # fast path: a one-byte varint
            byte = self.data[start]
            if byte < 0x80 and (maximum is None or byte <= maximum):
                self.pos = start + 1
                return byte
        result = shift = 0
        while True:
            if self.pos >= self.end:
                raise self.fail(what)
            byte = self.data[self.pos]
            self.pos += 1
            if shift > 63 or (shift == 63 and byte & 0x7E):
                raise self.fail(what)
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
        if TRACE is not None:
            self._trace(start, "varint", what)
        if maximum is not None and result > maximum:
            raise self.fail(
                "varint value exceeds maximum supported capacity. "
                f"(expected value less than {maximum}, got {result})."
            )
        return result

    def svarint(self, what: str = "unexpected end of data") -> int:
        return unzigzag(self.varint(what))

    def fixed(self, fmt: str, what: str = "unexpected end of data") -> int:
        st = _STRUCTS[fmt]
        size = st.size
        if self.remaining < size:
            raise self.fail(what)
        (v,) = st.unpack_from(self.data, self.pos)
        self.pos += size
        if TRACE is not None:
            self._trace(self.pos - size, fmt, what)
        return v

    def bytes(self, n: int, what: str = "unexpected end of data") -> bytes:
        if n < 0 or self.remaining < n:
            raise self.fail(what)
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def le_array(self, fmt: str, what: str = "unexpected end of data") -> tuple:
        """``varint n`` + n little-endian words; n is checked against the bytes left first."""
        n = self.varint(what)
        size = struct.calcsize("<" + fmt)
        if n > self.remaining // size:
            raise self.fail(f"array size in bytecode ({n}) exceeds maximum supported capacity")
        return self.words(fmt, n)

    def words(self, fmt: str, n: int) -> tuple:
        """``n`` little-endian words (the caller checked that they fit)."""
        size = struct.calcsize("<" + fmt)
        out = struct.unpack_from(f"<{n}{fmt}", self.data, self.pos)
        if TRACE is not None:
            for i in range(n):
                TRACE.append((self.base + self.pos + i * size, size, fmt, f"word {i}"))
        self.pos += n * size
        return out

    def skip_to_alignment(self, alignment: int, what: str = "unexpected end of data") -> None:
        if alignment <= 1:
            return
        pad = (-self.pos) % alignment
        if pad > self.remaining:
            raise self.fail(what)
        self.pos += pad

    def sub(self, n: int, what: str = "unexpected end of data") -> "Cursor":
        """A cursor over the next ``n`` bytes (offsets restart at 0), consuming them here."""
        if n < 0 or self.remaining < n:
            raise self.fail(what)
        c = Cursor(self.data[self.pos : self.pos + n], base=self.base + self.pos)
        self.pos += n
        return c
